// Mixture-of-experts SiLU-GLU FFN on CUDA (Backend::moe_ffn): out[t] = sum_j w[t, j] *
// down_e(silu(gate_e x[t]) * up_e x[t]) with e = ids[t, j] (-1: no expert), bf16 expert weights.
//
// Two kernels, each reading only the selected experts' rows (decode cost follows the active experts):
//  1. gate/up: one warp per (token, slot, intermediate row) computes both dot products over d and writes
//     h = silu(g) * u to scratch [n * k, max_inter];
//  2. down: one warp per (token, output row) sums the token's slots in ascending expert index (the CPU
//     reference's order) of w * down_e[row] . h.
// Napkin math (Qwen3-30B-A3B, batch 1): 8 experts x 3 x 768 x 2048 x 2 B = 75.5 MB a layer, 3.6 GB a
// token over 48 layers, ~0.85 ms at 4.3 TB/s if the kernels streamed at copy bandwidth.
// These first kernels favour clarity (fp32 accumulation, 4-byte weight loads); the grouped GEMM for
// prefill and the GPU router are not built yet.
#pragma once

#include "kernels/cuda/cuda_ops.h"

namespace spk::cuda {

struct MoeExpert {
  const bf16* gate;  // [inter, d]
  const bf16* up;    // [inter, d]
  const bf16* down;  // [d, inter]
  int inter;
};

// experts: device array of n_experts entries. h: scratch of n * k * max_inter floats.
Status moe_ffn_bf16(const MoeExpert* experts, int n_experts, const float* x, const int32_t* ids,
                    const float* w, int n, int k, int d, int max_inter, float* h, float* out, cudaStream_t s);

}  // namespace spk::cuda
