// The GPTQ W4A16 GEMV for what the fast kernel (w4a16.cu) does not take: act-order weights (g_idx, a group
// lookup per input) and group sizes that are not a multiple of 8. Thread t of block (bx, by) owns output
// column n = 128 bx + t and the K slice `by`; it dequantises each weight once and applies it to up to 8 rows
// of x held in shared memory. The K slices meet in y through atomicAdd (y holds the bias or 0 first). Correct
// at every shape, not fast: one 4-byte load in flight per thread and 8 rows of FMAs at any M.
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/linear/w4a16.h"

namespace spk::cuda {
namespace {

constexpr int kCols = 128;       // threads (columns) per block
constexpr int kRows = 8;         // x rows per launch
constexpr int kMaxSlice = 1024;  // K rows per block: x slice of kRows * kMaxSlice floats = 32 KiB

__global__ void __launch_bounds__(kCols)
    w4a16_gidx_kernel(W4A16Weight w, const float* __restrict__ x, int M, float* __restrict__ y, int slice) {
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
      const int g = w.g_idx ? __ldg(w.g_idx + k) : k / group;
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

Status w4a16_gidx_linear(const W4A16Weight& w, const float* x, int M, float* y, int sm_count,
                         cudaStream_t s) {
  // Enough K slices that the grid covers the SMs about twice.
  const int bx = (w.N + kCols - 1) / kCols;
  const int want = std::max(1, (2 * sm_count + bx - 1) / bx);
  int slice = (w.K + want - 1) / want;
  slice = std::min(kMaxSlice, (slice + 7) / 8 * 8);
  const int by = (w.K + slice - 1) / slice;
  for (int m0 = 0; m0 < M; m0 += kRows) {
    const int rows = std::min(kRows, M - m0);
    SPK_LAUNCH(w4a16_gidx_kernel, dim3(bx, by), dim3(kCols), 0, s, w, x + int64_t(m0) * w.K, rows,
               y + int64_t(m0) * w.N, slice);
  }
  return ok_status();
}

}  // namespace spk::cuda
