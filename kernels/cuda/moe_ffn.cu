#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/moe_ffn.h"

namespace spk::cuda {
namespace {

constexpr int kWarps = 8;  // rows per block, one warp each
constexpr int kTok = 4;    // tokens per pass over a weight row

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ void unpack8(const uint4& q, float* f) {
  const auto* p = reinterpret_cast<const __nv_bfloat162*>(&q);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __bfloat1622float2(p[i]);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}

// acc[j] += W[0:len] . v_j[0:len] for the nt <= kTok vectors v_j (lane-strided; reduce afterwards).
// NW weight rows at once (gate and up share the vectors).
template <int NW>
__device__ __forceinline__ void dot_rows(const bf16* const (&W)[NW], const float* const (&v)[kTok], int nt,
                                         int len, bool vec, int lane, float (&acc)[NW][kTok]) {
  if (vec) {
    for (int c = lane; c < len / 8; c += 32) {
      float wf[NW][8];
#pragma unroll
      for (int m = 0; m < NW; ++m) unpack8(reinterpret_cast<const uint4*>(W[m])[c], wf[m]);
#pragma unroll
      for (int j = 0; j < kTok; ++j) {
        if (j >= nt) break;
        const float4 a = reinterpret_cast<const float4*>(v[j])[2 * c];
        const float4 b = reinterpret_cast<const float4*>(v[j])[2 * c + 1];
#pragma unroll
        for (int m = 0; m < NW; ++m)
          acc[m][j] += wf[m][0] * a.x + wf[m][1] * a.y + wf[m][2] * a.z + wf[m][3] * a.w + wf[m][4] * b.x +
                       wf[m][5] * b.y + wf[m][6] * b.z + wf[m][7] * b.w;
      }
    }
  } else {
    for (int i = lane; i < len; i += 32) {
#pragma unroll
      for (int m = 0; m < NW; ++m) {
        const float wv = __bfloat162float(W[m][i]);
#pragma unroll
        for (int j = 0; j < kTok; ++j)
          if (j < nt) acc[m][j] += wv * v[j][i];
      }
    }
  }
}

// grid (ceil(max_inter / kWarps), max_active): h[slot, r] = silu(gate_e[r] . x[t]) * (up_e[r] . x[t]).
__global__ void gate_up_grouped(const MoeExpert* __restrict__ experts, MoeShape sh,
                                const float* __restrict__ x, int k, moe::Plan p) {
  const int a = blockIdx.y;
  if (a >= *p.n_active) return;
  const int lane = threadIdx.x & 31, r = blockIdx.x * kWarps + (threadIdx.x >> 5);
  const MoeExpert ex = experts[p.act_expert[a]];
  if (r >= ex.inter) return;
  const int off = p.act_off[a], cnt = p.act_cnt[a];
  const bf16* const W[2] = {ex.gate + static_cast<size_t>(r) * sh.d, ex.up + static_cast<size_t>(r) * sh.d};
  for (int i0 = 0; i0 < cnt; i0 += kTok) {
    const int nt = min(kTok, cnt - i0);
    int slot[kTok];
    const float* v[kTok];
#pragma unroll
    for (int j = 0; j < kTok; ++j) {
      slot[j] = p.order[off + i0 + (j < nt ? j : 0)];
      v[j] = x + static_cast<size_t>(slot[j] / k) * sh.d;
    }
    float acc[2][kTok] = {};
    dot_rows<2>(W, v, nt, sh.d, sh.vec, lane, acc);
#pragma unroll
    for (int j = 0; j < kTok; ++j) {
      const float g = warp_sum(acc[0][j]), u = warp_sum(acc[1][j]);
      if (lane == 0 && j < nt)
        p.h[static_cast<size_t>(slot[j]) * sh.max_inter + r] = g / (1.0f + __expf(-g)) * u;
    }
  }
}

// grid (ceil(d / kWarps), max_active): y[slot, r] = down_e[r] . h[slot].
__global__ void down_grouped(const MoeExpert* __restrict__ experts, MoeShape sh, moe::Plan p) {
  const int a = blockIdx.y;
  if (a >= *p.n_active) return;
  const int lane = threadIdx.x & 31, r = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (r >= sh.d) return;
  const MoeExpert ex = experts[p.act_expert[a]];
  const int off = p.act_off[a], cnt = p.act_cnt[a];
  const bf16* const W[1] = {ex.down + static_cast<size_t>(r) * ex.inter};
  for (int i0 = 0; i0 < cnt; i0 += kTok) {
    const int nt = min(kTok, cnt - i0);
    int slot[kTok];
    const float* v[kTok];
#pragma unroll
    for (int j = 0; j < kTok; ++j) {
      slot[j] = p.order[off + i0 + (j < nt ? j : 0)];
      v[j] = p.h + static_cast<size_t>(slot[j]) * sh.max_inter;
    }
    float acc[1][kTok] = {};
    dot_rows<1>(W, v, nt, ex.inter, sh.vec, lane, acc);
#pragma unroll
    for (int j = 0; j < kTok; ++j) {
      const float yv = warp_sum(acc[0][j]);
      if (lane == 0 && j < nt) p.y[static_cast<size_t>(slot[j]) * sh.d + r] = yv;
    }
  }
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
    const dim3 block(32 * kWarps);
    gate_up_grouped<<<dim3((sh.max_inter + kWarps - 1) / kWarps, A), block, 0, s>>>(experts, sh, x, k, p);
    SPK_CUDA_CHECK(cudaGetLastError());
    down_grouped<<<dim3((sh.d + kWarps - 1) / kWarps, A), block, 0, s>>>(experts, sh, p);
    SPK_CUDA_CHECK(cudaGetLastError());
  }
  return moe::combine(ids, w, sh.n_experts, n, k, sh.d, p.y, out, s);
}

}  // namespace spk::cuda
