#include <cstdio>
#include <cstdlib>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/linear/bf16_dot.cuh"
#include "kernels/cuda/moe/moe_ffn.h"
#include "kernels/knobs.h"

namespace spk::cuda {
namespace {

constexpr int kWarps = 4;  // warps per block
constexpr int kTok = 4;    // tokens per pass over a weight row

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// acc[m][j] += W_m[0:len] . v_j[0:len] for the M weight rows W_m and the nt <= kTok vectors v_j, lane-
// strided (reduce across the warp afterwards). Vector path: U 16-byte chunks of every row are loaded
// before any is used, so M * U loads are in flight per lane (a warp-per-row loop that uses each load at
// once keeps one round trip per chunk and streams at about half the copy bandwidth).
template <int M, int U>
__device__ __forceinline__ void dot_rows(const bf16* const (&W)[M], const float* const (&v)[kTok], int nt,
                                         int len, bool vec, int lane, float (&acc)[M][kTok]) {
  if (vec) {
    const int nch = len / 8;
    for (int c0 = lane; c0 < nch; c0 += 32 * U) {
      uint4 w[U][M];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (c0 + 32 * u < nch)
#pragma unroll
          for (int m = 0; m < M; ++m) w[u][m] = __ldcs(reinterpret_cast<const uint4*>(W[m]) + c0 + 32 * u);
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int c = c0 + 32 * u;
        if (c >= nch) break;
#pragma unroll
        for (int j = 0; j < kTok; ++j) {
          if (j >= nt) break;
          const float4 a = reinterpret_cast<const float4*>(v[j])[2 * c];
          const float4 b = reinterpret_cast<const float4*>(v[j])[2 * c + 1];
#pragma unroll
          for (int m = 0; m < M; ++m) acc[m][j] = dot8(w[u][m], a, b, acc[m][j]);
        }
      }
    }
  } else {
    for (int i = lane; i < len; i += 32) {
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const float wv = __bfloat162float(W[m][i]);
#pragma unroll
        for (int j = 0; j < kTok; ++j)
          if (j < nt) acc[m][j] += wv * v[j][i];
      }
    }
  }
}

// grid (ceil(max_inter / (kWarps * R)), max_active); warp w of block b owns intermediate rows
// (b * kWarps + w) * R + [0, R): h[slot, r] = silu(gate_e[r] . x[t]) * (up_e[r] . x[t]).
template <int R, int U>
__global__ void __launch_bounds__(32 * kWarps)
    gate_up_grouped(const MoeExpert* __restrict__ experts, MoeShape sh, const float* __restrict__ x, int k,
                    moe::Plan p) {
  const int a = blockIdx.y;
  if (a >= *p.n_active) return;
  const int lane = threadIdx.x & 31, r0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * R;
  const MoeExpert ex = experts[p.act_expert[a]];
  if (r0 >= ex.inter) return;
  const int off = p.act_off[a], cnt = p.act_cnt[a];
  const bf16* W[2 * R];  // gate rows, then up rows; rows past inter repeat the last and are not stored
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const size_t r = static_cast<size_t>(min(r0 + i, ex.inter - 1));
    W[i] = ex.gate + r * sh.d;
    W[R + i] = ex.up + r * sh.d;
  }
  for (int i0 = 0; i0 < cnt; i0 += kTok) {
    const int nt = min(kTok, cnt - i0);
    int slot[kTok];
    const float* v[kTok];
#pragma unroll
    for (int j = 0; j < kTok; ++j) {
      slot[j] = p.order[off + i0 + (j < nt ? j : 0)];
      v[j] = x + static_cast<size_t>(slot[j] / k) * sh.d;
    }
    float acc[2 * R][kTok] = {};
    dot_rows<2 * R, U>(W, v, nt, sh.d, sh.vec, lane, acc);
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int j = 0; j < kTok; ++j) {
        const float g = warp_sum(acc[i][j]), u = warp_sum(acc[R + i][j]);
        if (lane == 0 && j < nt && r0 + i < ex.inter)
          p.h[static_cast<size_t>(slot[j]) * sh.max_inter + r0 + i] = g / (1.0f + __expf(-g)) * u;
      }
  }
}

// grid (ceil(d / (kWarps * R)), max_active): y[slot, r] = down_e[r] . h[slot] for the warp's R rows.
template <int R, int U>
__global__ void __launch_bounds__(32 * kWarps)
    down_grouped(const MoeExpert* __restrict__ experts, MoeShape sh, moe::Plan p) {
  const int a = blockIdx.y;
  if (a >= *p.n_active) return;
  const int lane = threadIdx.x & 31, r0 = (blockIdx.x * kWarps + (threadIdx.x >> 5)) * R;
  if (r0 >= sh.d) return;
  const MoeExpert ex = experts[p.act_expert[a]];
  const int off = p.act_off[a], cnt = p.act_cnt[a];
  const bf16* W[R];
#pragma unroll
  for (int i = 0; i < R; ++i) W[i] = ex.down + static_cast<size_t>(min(r0 + i, sh.d - 1)) * ex.inter;
  for (int i0 = 0; i0 < cnt; i0 += kTok) {
    const int nt = min(kTok, cnt - i0);
    int slot[kTok];
    const float* v[kTok];
#pragma unroll
    for (int j = 0; j < kTok; ++j) {
      slot[j] = p.order[off + i0 + (j < nt ? j : 0)];
      v[j] = p.h + static_cast<size_t>(slot[j]) * sh.max_inter;
    }
    float acc[R][kTok] = {};
    dot_rows<R, U>(W, v, nt, ex.inter, sh.vec, lane, acc);
#pragma unroll
    for (int i = 0; i < R; ++i)
#pragma unroll
      for (int j = 0; j < kTok; ++j) {
        const float yv = warp_sum(acc[i][j]);
        if (lane == 0 && j < nt && r0 + i < sh.d) p.y[static_cast<size_t>(slot[j]) * sh.d + r0 + i] = yv;
      }
  }
}

// Rows per warp and chunks in flight per row, gate/up and down (SPARKCTL_MOE_GEMV="R1xU1,R2xU2"
// overrides for measuring; 1x1 is the plain warp-per-row loop).
struct GemvCfg {
  int r1 = 2, u1 = 2, r2 = 2, u2 = 4;
};

GemvCfg gemv_cfg() {
  GemvCfg c;
  if (const std::string e = word_knob("SPARKCTL_MOE_GEMV"); !e.empty()) {
    GemvCfg t;
    if (std::sscanf(e.c_str(), "%dx%d,%dx%d", &t.r1, &t.u1, &t.r2, &t.u2) == 4) c = t;
  }
  return c;
}

template <int R, int U>
void launch_gate_up(const MoeExpert* ex, const MoeShape& sh, const float* x, int k, const moe::Plan& p, int A,
                    cudaStream_t s) {
  gate_up_grouped<R, U>
      <<<dim3((sh.max_inter + kWarps * R - 1) / (kWarps * R), A), 32 * kWarps, 0, s>>>(ex, sh, x, k, p);
}
template <int R, int U>
void launch_down(const MoeExpert* ex, const MoeShape& sh, const moe::Plan& p, int A, cudaStream_t s) {
  down_grouped<R, U><<<dim3((sh.d + kWarps * R - 1) / (kWarps * R), A), 32 * kWarps, 0, s>>>(ex, sh, p);
}

using GateUpFn = void (*)(const MoeExpert*, const MoeShape&, const float*, int, const moe::Plan&, int,
                          cudaStream_t);
using DownFn = void (*)(const MoeExpert*, const MoeShape&, const moe::Plan&, int, cudaStream_t);

template <int R>
GateUpFn pick_gate_up(int u) {
  return u >= 4 ? launch_gate_up<R, 4> : u >= 2 ? launch_gate_up<R, 2> : launch_gate_up<R, 1>;
}
template <int R>
DownFn pick_down(int u) {
  return u >= 4 ? launch_down<R, 4> : u >= 2 ? launch_down<R, 2> : launch_down<R, 1>;
}

}  // namespace

Status moe_ffn_bf16(const MoeExpert* experts, const MoeShape& sh, const float* x, const int32_t* ids,
                    const float* w, int n, int k, void* scratch, bool tensor_cores, float* out,
                    cudaStream_t s) {
  if (n <= 0) return ok_status();
  const int nk = n * k, A = moe::max_active(nk, sh.n_experts);
  moe::Plan p;
  moe::carve(scratch, nk, sh.n_experts, sh.d, sh.max_inter, &p);
  SPK_TRY(moe::build_plan(ids, nk, sh.n_experts, p, s));
  if (tensor_cores && sh.vec) {
    SPK_TRY(moe::gemm_gate_up_down(experts, sh, x, n, k, p, s));
  } else {
    const GemvCfg c = gemv_cfg();
    const GateUpFn gu = c.r1 >= 4   ? pick_gate_up<4>(c.u1)
                        : c.r1 >= 2 ? pick_gate_up<2>(c.u1)
                                    : pick_gate_up<1>(c.u1);
    const DownFn dn = c.r2 >= 4 ? pick_down<4>(c.u2) : c.r2 >= 2 ? pick_down<2>(c.u2) : pick_down<1>(c.u2);
    gu(experts, sh, x, k, p, A, s);
    SPK_CUDA_CHECK(cudaGetLastError());
    dn(experts, sh, p, A, s);
    SPK_CUDA_CHECK(cudaGetLastError());
  }
  return moe::combine(ids, w, sh.n_experts, n, k, sh.d, p.y, out, s);
}

}  // namespace spk::cuda
