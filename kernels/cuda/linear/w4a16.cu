// The GPTQ W4A16 GEMV (layout in w4a16.h) for weights whose groups run in K order (no act-order g_idx) and
// whose group size is a multiple of 8; w4a16_gidx.cu takes the rest.
//
// Napkin math (H100, 3.35 TB/s): a batch-1 token of an 8B model reads ~3.6 GB of int4 weights with g128
// scales (+ 1 GB of bf16 lm_head): ~1.4 ms, ~700 tok/s at the roofline. Issue budget: 132 SMs x 4
// schedulers x 1.75 GHz x 32 lanes = 29.6 T lane-instructions/s against 6.7 T weights/s at full bandwidth,
// so a weight may cost ~4.4 instructions; the inner loop (w4a16_core.cuh) spends three at batch 1.
//
// Layout of the work: thread t of block (bx, by) owns the 4 adjacent output columns n0 = 4 (128 bx + t) and
// the K slice `by` (column blocks of a group's segments follow one another along x); its first chunk of
// packed rows is loaded before the PDL wait (weights are never written by a step). The x slice of up to MR
// rows sits in shared memory (read as broadcast float4). The K slices meet in y through atomicAdd, after a
// first kernel wrote y = bias (or 0).
#include <algorithm>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/linear/w4a16.h"
#include "kernels/cuda/linear/w4a16_core.cuh"

namespace spk::cuda {
namespace {

constexpr int kThreads = 128;             // threads per block
constexpr int kBlockCols = 4 * kThreads;  // 4 output columns per thread
constexpr int kMaxSlice = 1024;           // K rows per block: the x slice is MR * slice floats (<= 32 KiB)

// y_s = bias_s (or 0) for every segment s, rows [0, M).
__global__ void init_rows_kernel(W4A16Group g, int M) {
  pdl_begin();
  int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int s = 0; s < g.n; ++s) {
    const W4A16Segment& sg = g.segs[s];
    const int64_t len = int64_t(M) * sg.w.N;
    if (i < len) {
      sg.y[i] = sg.bias ? sg.bias[i % sg.w.N] : 0.0f;
      return;
    }
    i -= len;
  }
}

// Column block bx of the group: the segment that owns it and the block's index within that segment.
__device__ __forceinline__ int segment_of(const W4A16Group& g, int& bx) {
  for (int s = 0; s + 1 < g.n; ++s) {
    const int blocks = (g.segs[s].w.N + kBlockCols - 1) / kBlockCols;
    if (bx < blocks) return s;
    bx -= blocks;
  }
  return g.n - 1;
}

// Rows [m0, m0 + rows) of x (rows <= MR) against every segment's weight.
template <int MR, int CHUNK>
__global__ void __launch_bounds__(kThreads)
    w4a16_gemv_kernel(W4A16Group g, const float* __restrict__ x, int m0, int rows, int slice) {
  extern __shared__ float4 xs4[];
  float* xs = reinterpret_cast<float*>(xs4);  // [MR][slice]
  int bx = blockIdx.x;
  const W4A16Segment& sg = g.segs[segment_of(g, bx)];
  const W4A16Weight& w = sg.w;
  const int n0 = (bx * kThreads + threadIdx.x) * 4;
  const int k0 = blockIdx.y * slice, k1 = min(w.K, k0 + slice), len = k1 - k0;
  const bool live = n0 < w.N;
  int4 cur[CHUNK];
  if (live) w4a16::load_rows(cur, w.qweight + n0, k0 / 8, k1 / 8, w.N);  // weights: before the wait
  pdl_wait();                                                            // x and y come from earlier kernels
  const float* xm = x + int64_t(m0) * w.K;
  for (int i = threadIdx.x; i < MR * len; i += kThreads) {
    const int m = i / len, k = i - m * len;
    xs[m * slice + k] = m < rows ? xm[int64_t(m) * w.K + k0 + k] : 0.0f;
  }
  __syncthreads();
  pdl_launch_dependents();
  if (!live) return;
  float out[MR][4] = {};
  w4a16::accumulate<MR, CHUNK>(w, xs, slice, k0, k1, n0, cur, out);
  float* y = sg.y + int64_t(m0) * w.N;
#pragma unroll
  for (int m = 0; m < MR; ++m)
    if (m < rows) {
#pragma unroll
      for (int c = 0; c < 4; ++c) atomicAdd(y + int64_t(m) * w.N + n0 + c, out[m][c]);
    }
}

template <int MR>
Status launch_rows(const W4A16Group& g, int col_blocks, const float* x, int m0, int rows, int slice,
                   cudaStream_t s) {
  constexpr int chunk = MR <= 2 ? 8 : 4;
  const int K = g.segs[0].w.K;
  const dim3 grid(col_blocks, (K + slice - 1) / slice);
  const size_t smem = size_t(MR) * slice * sizeof(float);
  SPK_LAUNCH((w4a16_gemv_kernel<MR, chunk>), grid, dim3(kThreads), smem, s, g, x, m0, rows, slice);
  return ok_status();
}

Status check_shape(const W4A16Weight& w) {
  if (w.K % 8 != 0 || w.N % 8 != 0 || w.K <= 0 || w.N <= 0)
    return make_error("w4a16_linear: K " + std::to_string(w.K) + ", N " + std::to_string(w.N) +
                      " (both must be positive multiples of 8)");
  return ok_status();
}

}  // namespace

bool w4a16_groupable(const W4A16Weight& w) {
  return !w.g_idx && (w.group_size <= 0 || w.group_size % 8 == 0);
}

Status w4a16_linear_group(const W4A16Group& g, const float* x, int M, int sm_count, cudaStream_t s) {
  if (g.n <= 0 || g.n > kW4A16MaxGroup)
    return make_error("w4a16_linear_group: " + std::to_string(g.n) + " segments");
  const W4A16Weight& w0 = g.segs[0].w;
  int col_blocks = 0;
  int64_t total = 0;
  for (int i = 0; i < g.n; ++i) {
    const W4A16Weight& w = g.segs[i].w;
    SPK_TRY(check_shape(w));
    if (w.K != w0.K || w.group_size != w0.group_size || !w4a16_groupable(w))
      return make_error("w4a16_linear_group: segment " + std::to_string(i) +
                        " differs from the first in K or group size, or needs the act-order kernel");
    col_blocks += (w.N + kBlockCols - 1) / kBlockCols;
    total += int64_t(M) * w.N;
  }
  if (M <= 0) return ok_status();
  SPK_LAUNCH(init_rows_kernel, dim3(unsigned((total + 255) / 256)), dim3(256), 0, s, g, M);
  const int slice = w4a16::slice_rows(w0.K, w0.group_size, col_blocks, sm_count, kMaxSlice);
  for (int m0 = 0; m0 < M; m0 += 8) {
    const int rows = std::min(8, M - m0);
    if (rows == 1)
      SPK_TRY(launch_rows<1>(g, col_blocks, x, m0, rows, slice, s));
    else if (rows == 2)
      SPK_TRY(launch_rows<2>(g, col_blocks, x, m0, rows, slice, s));
    else if (rows <= 4)
      SPK_TRY(launch_rows<4>(g, col_blocks, x, m0, rows, slice, s));
    else
      SPK_TRY(launch_rows<8>(g, col_blocks, x, m0, rows, slice, s));
  }
  return ok_status();
}

Status w4a16_linear(const W4A16Weight& w, const float* x, int M, const float* bias, float* y, int sm_count,
                    cudaStream_t s) {
  SPK_TRY(check_shape(w));
  W4A16Group g;
  g.segs[0] = W4A16Segment{w, bias, y};
  g.n = 1;
  if (w4a16_groupable(w)) return w4a16_linear_group(g, x, M, sm_count, s);
  if (M <= 0) return ok_status();
  SPK_LAUNCH(init_rows_kernel, dim3(unsigned((int64_t(M) * w.N + 255) / 256)), dim3(256), 0, s, g, M);
  return w4a16_gidx_linear(w, x, M, y, sm_count, s);
}

}  // namespace spk::cuda
