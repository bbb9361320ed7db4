// GPTQ W4A16 GEMV (see w4a16.h for the layout). Napkin math: an 8B model's int4 weights with g128 scales
// are ~3.6 GB + the bf16 lm_head (1 GB), so a batch-1 token reads ~4.6 GB: ~1.4 ms at 3.35 TB/s (H100),
// ~700 tok/s at the roofline against ~210 for bf16.
//
// Layout of the work: thread t of block (bx, by) owns output column n = 128 bx + t and the K slice `by`
// (kSplitK rows of K, a multiple of 8). A warp's loads of one packed row are 32 consecutive int32 (128
// bytes, coalesced); the scale and zero of a group are loaded once per 8 inputs and stay in L1 for the
// group. x's slice for up to 8 rows sits in shared memory. The K slices meet in y through atomicAdd, after
// a first kernel wrote y = bias (or 0). This is the simple form (no repack, no tensor cores, ~1 load in
// flight per thread): correct at every shape, not yet at the roofline.
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/linear/w4a16.h"

namespace spk::cuda {
namespace {

constexpr int kCols = 128;       // threads (columns) per block
constexpr int kRows = 8;         // x rows per launch
constexpr int kMaxSlice = 1024;  // K rows per block: x slice of kRows * kMaxSlice floats = 32 KiB

__global__ void init_rows_kernel(float* __restrict__ y, const float* __restrict__ bias, int M, int N) {
  pdl_begin();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < int64_t(M) * N) y[i] = bias ? bias[i % N] : 0.0f;
}

template <bool GIDX>
__global__ void __launch_bounds__(kCols)
    w4a16_kernel(W4A16Weight w, const float* __restrict__ x, int M, float* __restrict__ y, int slice) {
  __shared__ float xs[kRows * kMaxSlice];
  const int n = blockIdx.x * kCols + threadIdx.x;
  const int k0 = blockIdx.y * slice, k1 = min(w.K, k0 + slice);
  const int group = w.group_size > 0 ? w.group_size : w.K;
  pdl_wait();  // x and y come from earlier kernels
  for (int i = threadIdx.x; i < kRows * (k1 - k0); i += kCols) {
    const int m = i / (k1 - k0), k = i % (k1 - k0);
    xs[m * kMaxSlice + k] = m < M ? x[int64_t(m) * w.K + k0 + k] : 0.0f;
  }
  __syncthreads();
  pdl_launch_dependents();
  if (n >= w.N) return;
  float acc[kRows];
#pragma unroll
  for (int m = 0; m < kRows; ++m) acc[m] = 0.0f;
  const int zshift = 4 * (n & 7);
  int cur_g = -1;
  float s = 0.0f, z = 0.0f;
#pragma unroll 4
  for (int k8 = k0 / 8; k8 < k1 / 8; ++k8) {
    const uint32_t q = static_cast<uint32_t>(__ldg(w.qweight + int64_t(k8) * w.N + n));
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int k = k8 * 8 + j;
      const int g = GIDX ? __ldg(w.g_idx + k) : k / group;
      if (g != cur_g) {
        cur_g = g;
        s = __half2float(__ushort_as_half(__ldg(w.scales + int64_t(g) * w.N + n)));
        const uint32_t zq = static_cast<uint32_t>(__ldg(w.qzeros + int64_t(g) * (w.N / 8) + n / 8));
        z = float(((zq >> zshift) & 15u) + 1u);
      }
      const float wv = (float((q >> (4 * j)) & 15u) - z) * s;
      const float* xk = xs + (k - k0);
#pragma unroll
      for (int m = 0; m < kRows; ++m) acc[m] = fmaf(wv, xk[m * kMaxSlice], acc[m]);
    }
  }
  for (int m = 0; m < M && m < kRows; ++m) atomicAdd(y + int64_t(m) * w.N + n, acc[m]);
}

}  // namespace

Status w4a16_linear(const W4A16Weight& w, const float* x, int M, const float* bias, float* y, int sm_count,
                    cudaStream_t s) {
  if (w.K % 8 != 0 || w.N % 8 != 0 || w.K <= 0 || w.N <= 0)
    return make_error("w4a16_linear: K " + std::to_string(w.K) + ", N " + std::to_string(w.N) +
                      " (both must be positive multiples of 8)");
  if (M <= 0) return ok_status();
  const int64_t total = int64_t(M) * w.N;
  SPK_LAUNCH(init_rows_kernel, dim3(unsigned((total + 255) / 256)), dim3(256), 0, s, y, bias, M, w.N);
  // Enough K slices that the grid covers the SMs about twice.
  const int bx = (w.N + kCols - 1) / kCols;
  const int want = std::max(1, (2 * sm_count + bx - 1) / bx);
  int slice = (w.K + want - 1) / want;
  slice = std::min(kMaxSlice, (slice + 7) / 8 * 8);
  const int by = (w.K + slice - 1) / slice;
  for (int m0 = 0; m0 < M; m0 += kRows) {
    const int rows = std::min(kRows, M - m0);
    const float* xm = x + int64_t(m0) * w.K;
    float* ym = y + int64_t(m0) * w.N;
    if (w.g_idx)
      SPK_LAUNCH(w4a16_kernel<true>, dim3(bx, by), dim3(kCols), 0, s, w, xm, rows, ym, slice);
    else
      SPK_LAUNCH(w4a16_kernel<false>, dim3(bx, by), dim3(kCols), 0, s, w, xm, rows, ym, slice);
  }
  return ok_status();
}

}  // namespace spk::cuda
