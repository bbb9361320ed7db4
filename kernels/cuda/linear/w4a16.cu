// The GPTQ W4A16 GEMV (layout in w4a16.h) for weights whose groups run in K order (no act-order g_idx) and
// whose group size is a multiple of 8; w4a16_gidx.cu takes the rest.
//
// Napkin math (H100, 3.35 TB/s): a batch-1 token of an 8B model reads ~3.6 GB of int4 weights with g128
// scales (+ 1 GB of bf16 lm_head): ~1.4 ms, ~700 tok/s at the roofline. Issue budget: 132 SMs x 4
// schedulers x 1.75 GHz x 32 lanes = 29.6 T lane-instructions/s against 6.7 T weights/s at full bandwidth,
// so a weight may cost ~4.4 instructions. Here it costs three: a shift and a LOP3 make the float 1 + q/16
// (the nibble in the top mantissa bits of 1.0f; sm_90 converts int -> float at 1/8 of the FMA rate), and an
// FMA per x row. The zero and the scale are applied once per group and column:
//   sum_k x_k (q_k - z) s = s (16 sum_k x_k (1 + q_k/16) - (16 + z) sum_k x_k).
//
// Layout of the work: thread t of block (bx, by) owns the 4 adjacent output columns n0 = 4 (128 bx + t) and
// the K slice `by`; a warp's load of one packed row is 32 x 16 bytes, coalesced, and two chunks of rows are
// in flight (the first is issued before the PDL wait: weights are never written by a step). The x slice of
// up to MR rows sits in shared memory (read as broadcast float4). The K slices meet in y through atomicAdd,
// after a first kernel wrote y = bias (or 0).
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/linear/w4a16.h"

namespace spk::cuda {
namespace {

constexpr int kThreads = 128;             // threads per block
constexpr int kBlockCols = 4 * kThreads;  // 4 output columns per thread
constexpr int kMaxSlice = 1024;           // K rows per block: the x slice is MR * slice floats (<= 32 KiB)
constexpr int kMinSlice = 64;             // fewer would spend more on atomics and x loads than on weights

__global__ void init_rows_kernel(float* __restrict__ y, const float* __restrict__ bias, int M, int N) {
  pdl_begin();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < int64_t(M) * N) y[i] = bias ? bias[i % N] : 0.0f;
}

// Nibble J of w as the float 1 + q/16.
template <int J>
__device__ __forceinline__ float nib(uint32_t w) {
  constexpr int sh = 19 - 4 * J;
  uint32_t t;
  if constexpr (sh >= 0)
    t = w << sh;
  else
    t = w >> -sh;
  return __uint_as_float((t & 0x00780000u) | 0x3F800000u);
}

template <int CHUNK>
__device__ __forceinline__ void load_rows(int4 (&q)[CHUNK], const int32_t* __restrict__ qp, int r0, int rend,
                                          int N) {
#pragma unroll
  for (int c = 0; c < CHUNK; ++c)
    q[c] = r0 + c < rend ? __ldg(reinterpret_cast<const int4*>(qp + int64_t(r0 + c) * N))
                         : make_int4(0, 0, 0, 0);
}

template <int MR, int CHUNK>
__global__ void __launch_bounds__(kThreads)
    w4a16_gemv_kernel(W4A16Weight w, const float* __restrict__ x, int M, float* __restrict__ y, int slice) {
  extern __shared__ float4 xs4[];
  const float* xs = reinterpret_cast<const float*>(xs4);  // [MR][slice]
  const int n0 = (blockIdx.x * kThreads + threadIdx.x) * 4;
  const int k0 = blockIdx.y * slice, k1 = min(w.K, k0 + slice), len = k1 - k0;
  const int group = w.group_size > 0 ? w.group_size : w.K;
  const bool live = n0 < w.N;
  const int32_t* qp = w.qweight + (live ? n0 : 0);
  const int rbeg = k0 / 8, rend = k1 / 8;
  int4 cur[CHUNK], next[CHUNK];
  if (live) load_rows(cur, qp, rbeg, rend, w.N);
  pdl_wait();  // x and y come from earlier kernels
  for (int i = threadIdx.x; i < MR * len; i += kThreads) {
    const int m = i / len, k = i - m * len;
    reinterpret_cast<float*>(xs4)[m * slice + k] = m < M ? x[int64_t(m) * w.K + k0 + k] : 0.0f;
  }
  __syncthreads();
  pdl_launch_dependents();
  if (!live) return;

  float out[MR][4], acc[MR][4], xsum[MR];
#pragma unroll
  for (int m = 0; m < MR; ++m) {
    xsum[m] = 0.0f;
#pragma unroll
    for (int c = 0; c < 4; ++c) out[m][c] = acc[m][c] = 0.0f;
  }
  float s[4] = {0, 0, 0, 0}, zz[4] = {0, 0, 0, 0};  // the group's scale and 16 + zero, per column
  int seg_end = k0;                                 // where the current group ends in this slice
  auto close_group = [&]() {
#pragma unroll
    for (int m = 0; m < MR; ++m) {
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        out[m][c] = fmaf(s[c], fmaf(16.0f, acc[m][c], -zz[c] * xsum[m]), out[m][c]);
        acc[m][c] = 0.0f;
      }
      xsum[m] = 0.0f;
    }
  };
  for (int r0 = rbeg; r0 < rend; r0 += CHUNK) {
    load_rows(next, qp, r0 + CHUNK, rend, w.N);
#pragma unroll
    for (int j = 0; j < CHUNK; ++j) {
      const int r = r0 + j;
      if (r >= rend) break;
      if (8 * r >= seg_end) {  // a new group (warp-uniform)
        close_group();
        const int g = 8 * r / group;
        seg_end = min(k1, (g + 1) * group);
        const uint2 sr = __ldg(reinterpret_cast<const uint2*>(w.scales + int64_t(g) * w.N + n0));
        const uint32_t zw = uint32_t(__ldg(w.qzeros + int64_t(g) * (w.N / 8) + n0 / 8)) >> (4 * (n0 & 7));
        s[0] = __half2float(__ushort_as_half(uint16_t(sr.x))),
        s[1] = __half2float(__ushort_as_half(uint16_t(sr.x >> 16)));
        s[2] = __half2float(__ushort_as_half(uint16_t(sr.y))),
        s[3] = __half2float(__ushort_as_half(uint16_t(sr.y >> 16)));
#pragma unroll
        for (int c = 0; c < 4; ++c) zz[c] = float(17u + ((zw >> (4 * c)) & 15u));  // 16 + (stored zero + 1)
      }
      const uint32_t qw[4] = {uint32_t(cur[j].x), uint32_t(cur[j].y), uint32_t(cur[j].z), uint32_t(cur[j].w)};
      float f[4][8];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        f[c][0] = nib<0>(qw[c]), f[c][1] = nib<1>(qw[c]), f[c][2] = nib<2>(qw[c]), f[c][3] = nib<3>(qw[c]);
        f[c][4] = nib<4>(qw[c]), f[c][5] = nib<5>(qw[c]), f[c][6] = nib<6>(qw[c]), f[c][7] = nib<7>(qw[c]);
      }
      const float* xk = xs + (8 * r - k0);
#pragma unroll
      for (int m = 0; m < MR; ++m) {
        const float4 a = *reinterpret_cast<const float4*>(xk + m * slice);
        const float4 b = *reinterpret_cast<const float4*>(xk + m * slice + 4);
        xsum[m] += ((a.x + a.y) + (a.z + a.w)) + ((b.x + b.y) + (b.z + b.w));
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          float t = acc[m][c];
          t = fmaf(a.x, f[c][0], t), t = fmaf(a.y, f[c][1], t), t = fmaf(a.z, f[c][2], t);
          t = fmaf(a.w, f[c][3], t), t = fmaf(b.x, f[c][4], t), t = fmaf(b.y, f[c][5], t);
          t = fmaf(b.z, f[c][6], t), t = fmaf(b.w, f[c][7], t);
          acc[m][c] = t;
        }
      }
    }
#pragma unroll
    for (int j = 0; j < CHUNK; ++j) cur[j] = next[j];
  }
  close_group();
#pragma unroll
  for (int m = 0; m < MR; ++m)
    if (m < M) {
#pragma unroll
      for (int c = 0; c < 4; ++c) atomicAdd(y + int64_t(m) * w.N + n0 + c, out[m][c]);
    }
}

// K rows per block: enough slices that the grid fills the SMs about four blocks deep, at least kMinSlice
// rows each, and aligned to the groups where that is possible (a slice that cuts a group pays two scale
// applications for it).
int slice_rows(const W4A16Weight& w, int sm_count) {
  const int bx = (w.N + kBlockCols - 1) / kBlockCols;
  const int want = std::max(1, (4 * sm_count + bx - 1) / bx);
  int slice = std::max(kMinSlice, ((w.K + want - 1) / want + 7) / 8 * 8);
  const int group = w.group_size;
  if (group > 0 && group <= kMaxSlice) {
    if (slice >= group) {
      slice = std::min((slice + group - 1) / group, kMaxSlice / group) * group;
    } else {
      int s = group;  // the smallest whole fraction of a group that is at least `slice`, if one is
      for (int d = 2; d <= group / 8; ++d)
        if (group % d == 0 && (group / d) % 8 == 0 && group / d >= slice) s = group / d;
      slice = s;
    }
  }
  return std::min(slice, kMaxSlice);
}

template <int MR>
Status launch_rows(const W4A16Weight& w, const float* x, int rows, float* y, int slice, cudaStream_t s) {
  constexpr int chunk = MR <= 2 ? 8 : 4;
  const dim3 grid((w.N + kBlockCols - 1) / kBlockCols, (w.K + slice - 1) / slice);
  const size_t smem = size_t(MR) * slice * sizeof(float);
  SPK_LAUNCH((w4a16_gemv_kernel<MR, chunk>), grid, dim3(kThreads), smem, s, w, x, rows, y, slice);
  return ok_status();
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
  if (w.g_idx || (w.group_size > 0 && w.group_size % 8 != 0))
    return w4a16_gidx_linear(w, x, M, y, sm_count, s);
  const int slice = slice_rows(w, sm_count);
  for (int m0 = 0; m0 < M; m0 += 8) {
    const int rows = std::min(8, M - m0);
    const float* xm = x + int64_t(m0) * w.K;
    float* ym = y + int64_t(m0) * w.N;
    if (rows == 1)
      SPK_TRY(launch_rows<1>(w, xm, rows, ym, slice, s));
    else if (rows == 2)
      SPK_TRY(launch_rows<2>(w, xm, rows, ym, slice, s));
    else if (rows <= 4)
      SPK_TRY(launch_rows<4>(w, xm, rows, ym, slice, s));
    else
      SPK_TRY(launch_rows<8>(w, xm, rows, ym, slice, s));
  }
  return ok_status();
}

}  // namespace spk::cuda
