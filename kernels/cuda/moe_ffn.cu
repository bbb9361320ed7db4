#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/moe_ffn.h"

namespace spk::cuda {
namespace {

constexpr int kWarps = 8;  // rows per block, one warp each

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// dot(W[row, 0:len], v[0:len]) over one warp; W bf16, v f32. Pairs of bf16 when aligned.
__device__ __forceinline__ float warp_dot(const bf16* wrow, const float* v, int len, int lane) {
  float acc = 0.0f;
  if ((len & 1) == 0 && (reinterpret_cast<uintptr_t>(wrow) & 3) == 0) {
    const auto* w2 = reinterpret_cast<const __nv_bfloat162*>(wrow);
    for (int i = lane; i < len / 2; i += 32) {
      const float2 f = __bfloat1622float2(w2[i]);
      acc += f.x * v[2 * i] + f.y * v[2 * i + 1];
    }
  } else {
    for (int i = lane; i < len; i += 32) acc += __bfloat162float(wrow[i]) * v[i];
  }
  return warp_sum(acc);
}

// grid: (ceil(max_inter / kWarps), n * k). h[(t * k + j) * max_inter + r] = silu(g) * u.
__global__ void moe_gate_up(const MoeExpert* experts, int n_experts, const float* x, const int32_t* ids,
                            int k, int d, int max_inter, float* h) {
  const int slot = blockIdx.y, t = slot / k;
  const int lane = threadIdx.x & 31, r = blockIdx.x * kWarps + (threadIdx.x >> 5);
  const int e = ids[slot];
  if (e < 0 || e >= n_experts) return;
  const MoeExpert ex = experts[e];
  if (r >= ex.inter) return;
  const float* xt = x + static_cast<size_t>(t) * d;
  const float g = warp_dot(ex.gate + static_cast<size_t>(r) * d, xt, d, lane);
  const float u = warp_dot(ex.up + static_cast<size_t>(r) * d, xt, d, lane);
  if (lane == 0) h[static_cast<size_t>(slot) * max_inter + r] = g / (1.0f + __expf(-g)) * u;
}

// grid: (ceil(d / kWarps), n). out[t, r] = sum over the token's slots, ascending expert index.
__global__ void moe_down(const MoeExpert* experts, int n_experts, const int32_t* ids, const float* w, int k,
                         int d, int max_inter, const float* h, float* out) {
  const int t = blockIdx.y;
  const int lane = threadIdx.x & 31, r = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (r >= d) return;
  float acc = 0.0f;
  int last = -1;  // slots in ascending expert index; k is small (<= 16), so a scan per slot is cheap
  for (int n_done = 0; n_done < k; ++n_done) {
    int pick = -1, pick_e = 0x7fffffff;
    for (int j = 0; j < k; ++j) {
      const int e = ids[t * k + j];
      if (e < 0 || e >= n_experts) continue;
      if (e > last && e < pick_e) pick = j, pick_e = e;
    }
    if (pick < 0) break;
    last = pick_e;
    // Every slot naming expert `pick_e` (a token may name one expert twice only in degenerate inputs).
    for (int j = 0; j < k; ++j) {
      if (ids[t * k + j] != pick_e) continue;
      const MoeExpert ex = experts[pick_e];
      const float dot = warp_dot(ex.down + static_cast<size_t>(r) * ex.inter,
                                 h + static_cast<size_t>(t * k + j) * max_inter, ex.inter, lane);
      acc += w[t * k + j] * dot;
    }
  }
  if (lane == 0) out[static_cast<size_t>(t) * d + r] = acc;
}

}  // namespace

Status moe_ffn_bf16(const MoeExpert* experts, int n_experts, const float* x, const int32_t* ids,
                    const float* w, int n, int k, int d, int max_inter, float* h, float* out,
                    cudaStream_t s) {
  if (n <= 0) return ok_status();
  const dim3 block(32 * kWarps);
  moe_gate_up<<<dim3((max_inter + kWarps - 1) / kWarps, n * k), block, 0, s>>>(experts, n_experts, x, ids, k,
                                                                               d, max_inter, h);
  SPK_CUDA_CHECK(cudaGetLastError());
  moe_down<<<dim3((d + kWarps - 1) / kWarps, n), block, 0, s>>>(experts, n_experts, ids, w, k, d, max_inter,
                                                                h, out);
  SPK_CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace spk::cuda
