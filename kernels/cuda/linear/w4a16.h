// GPTQ int4 weights, bf16-free: y[m, n] = x[m, :] . dequant(W)[n, :] (+ bias[n]) straight from the
// checkpoint layout (kernels/formats/linear_weight.h, gptq_int4): qweight i32 [K/8, N] (nibble j of row i is
// input k = 8 i + j), qzeros i32 [groups, N/8] (stored zero - 1), scales f16 [groups, N], optional g_idx i32
// [K]. W[n, k] = scale[g, n] * (q[k, n] - (zero[g, n] + 1)), g = g_idx ? g_idx[k] : k / group.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/base/status.h"

namespace spk::cuda {

struct W4A16Weight {
  const int32_t* qweight = nullptr;
  const int32_t* qzeros = nullptr;
  const uint16_t* scales = nullptr;  // f16 bits
  const int32_t* g_idx = nullptr;    // null: group = k / group_size
  int group_size = 0;                // <= 0: one group of K
  int N = 0, K = 0;
};

// One output of a grouped launch: y = x . dequant(w) (+ bias).
struct W4A16Segment {
  W4A16Weight w;
  const float* bias = nullptr;
  float* y = nullptr;
};

// Up to kW4A16MaxGroup linears reading the same x [M, K] (q/k/v; gate/up), run as one launch: their weights
// share K and the group size, and take the fast kernel (no g_idx, group size a multiple of 8 or all of K).
inline constexpr int kW4A16MaxGroup = 4;
struct W4A16Group {
  W4A16Segment segs[kW4A16MaxGroup];
  int n = 0;
};
bool w4a16_groupable(const W4A16Weight& w);
Status w4a16_linear_group(const W4A16Group& g, const float* x, int M, int sm_count, cudaStream_t s);

// K % 8 == 0 and N % 8 == 0 (the packing); any M (rows are taken 8 at a time: every row block re-reads the
// weights, so prefill pays M / 8 weight passes). `sm_count` sizes the split along K. Chooses between the
// fast kernel (w4a16.cu: groups in K order, group size a multiple of 8) and the generic one.
Status w4a16_linear(const W4A16Weight& w, const float* x, int M, const float* bias, float* y, int sm_count,
                    cudaStream_t s);

// The generic kernel (w4a16_gidx.cu): act-order g_idx and any group size. Adds into y (which holds the bias
// or 0).
Status w4a16_gidx_linear(const W4A16Weight& w, const float* x, int M, float* y, int sm_count, cudaStream_t s);

}  // namespace spk::cuda
