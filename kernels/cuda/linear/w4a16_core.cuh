// The inner loop of the W4A16 kernels (w4a16.cu, moe/moe_w4a16.cu): one thread's 4 adjacent output columns
// n0..n0+3 of a GPTQ weight (layout in w4a16.h; groups in K order, group size a multiple of 8) over the K
// slice [k0, k1), against MR rows of x in shared memory (row m at xs + m * stride, indexed from k0).
//
// A weight costs three instructions: a shift and a LOP3 make the float 1 + q/16 (the nibble in the top
// mantissa bits of 1.0f; sm_90 converts int -> float at 1/8 of the FMA rate), and an FMA per x row. The zero
// and the scale are applied once per group and column:
//   sum_k x_k (q_k - z) s = s (16 sum_k x_k (1 + q_k/16) - (16 + z) sum_k x_k).
// Packed rows are loaded CHUNK at a time, the next chunk while this one is used (16 bytes a load, a warp's
// load 512 contiguous bytes).
#pragma once

#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/linear/w4a16.h"

namespace spk::cuda::w4a16 {

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

// Packed rows r0 .. r0 + CHUNK - 1 (zero past rend) of the columns at qp.
template <int CHUNK>
__device__ __forceinline__ void load_rows(int4 (&q)[CHUNK], const int32_t* __restrict__ qp, int r0, int rend,
                                          int N) {
#pragma unroll
  for (int c = 0; c < CHUNK; ++c)
    q[c] = r0 + c < rend ? __ldg(reinterpret_cast<const int4*>(qp + int64_t(r0 + c) * N))
                         : make_int4(0, 0, 0, 0);
}

// out[m][c] += sum over k in [k0, k1) of x[m][k] * W[k][n0 + c]. `cur` holds the first chunk already
// (load_rows(cur, w.qweight + n0, k0 / 8, k1 / 8, w.N): a kernel may issue it before its PDL wait).
template <int MR, int CHUNK>
__device__ __forceinline__ void accumulate(const W4A16Weight& w, const float* xs, int stride, int k0, int k1,
                                           int n0, int4 (&cur)[CHUNK], float (&out)[MR][4]) {
  const int group = w.group_size > 0 ? w.group_size : w.K;
  const int32_t* qp = w.qweight + n0;
  const int rend = k1 / 8;
  float acc[MR][4], xsum[MR];
#pragma unroll
  for (int m = 0; m < MR; ++m) {
    xsum[m] = 0.0f;
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[m][c] = 0.0f;
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
  int4 next[CHUNK];
  for (int r0 = k0 / 8; r0 < rend; r0 += CHUNK) {
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
        s[0] = __half2float(__ushort_as_half(uint16_t(sr.x)));
        s[1] = __half2float(__ushort_as_half(uint16_t(sr.x >> 16)));
        s[2] = __half2float(__ushort_as_half(uint16_t(sr.y)));
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
        const float4 a = *reinterpret_cast<const float4*>(xk + m * stride);
        const float4 b = *reinterpret_cast<const float4*>(xk + m * stride + 4);
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
}

// K rows per block for a weight of this shape: enough slices that `blocks_per_col_block` blocks fill the
// SMs about four deep, at least 64 rows each (fewer would spend more on atomics and x loads than on
// weights), at most `max_slice`, aligned to the groups where possible (a slice that cuts a group pays two
// scale applications for it).
inline int slice_rows(int K, int group_size, int col_blocks, int sm_count, int max_slice) {
  const int want = std::max(1, (4 * sm_count + col_blocks - 1) / col_blocks);
  int slice = std::max(64, ((K + want - 1) / want + 7) / 8 * 8);
  if (group_size > 0 && group_size <= max_slice) {
    if (slice >= group_size) {
      slice = std::min((slice + group_size - 1) / group_size, max_slice / group_size) * group_size;
    } else {
      int s = group_size;  // the smallest whole fraction of a group that is at least `slice`, if one is
      for (int d = 2; d <= group_size / 8; ++d)
        if (group_size % d == 0 && (group_size / d) % 8 == 0 && group_size / d >= slice) s = group_size / d;
      slice = s;
    }
  }
  return std::min(slice, max_slice);
}

}  // namespace spk::cuda::w4a16
