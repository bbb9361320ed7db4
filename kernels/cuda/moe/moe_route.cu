#include <math.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/moe/moe_route.h"

namespace spk::cuda {
namespace {

constexpr int kWarps = 4;  // tokens per block

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Whether (w, j) ranks before (v, i): larger value, ties to the lower index; NaN never does.
__device__ __forceinline__ bool beats(float w, int j, float v, int i) {
  return !isnan(w) && (isnan(v) || w > v || (w == v && j < i));
}
__device__ __forceinline__ void better(float& v, int& i, float w, int j) {
  if (beats(w, j, v, i)) v = w, i = j;
}
__device__ __forceinline__ void warp_argmax(float& v, int& i) {
  for (int o = 16; o > 0; o >>= 1) {
    const float w = __shfl_xor_sync(0xffffffffu, v, o);
    const int j = __shfl_xor_sync(0xffffffffu, i, o);
    better(v, i, w, j);
  }
}

__global__ void moe_route_kernel(const MoeRouteSpec sp, const float* __restrict__ logits, int n,
                                 const float* __restrict__ bias, int32_t* __restrict__ ids,
                                 float* __restrict__ wout) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int t = blockIdx.x * kWarps + warp;
  if (t >= n) return;
  const int E = sp.num_experts, K = sp.top_k, S = K + (sp.shared ? 1 : 0);  // slots(), host-only
  float* score = smem + warp * 2 * E;
  float* choice = score + E;
  const float* x = logits + static_cast<size_t>(t) * (E + (sp.shared_gated ? 1 : 0));  // logit_cols()

  if (sp.score == MoeScore::softmax) {
    float mx = -INFINITY;
    for (int e = lane; e < E; e += 32) mx = fmaxf(mx, x[e]);
    mx = warp_max(mx);
    float sum = 0.0f;
    for (int e = lane; e < E; e += 32) sum += (score[e] = expf(x[e] - mx));
    sum = warp_sum(sum);
    for (int e = lane; e < E; e += 32) score[e] /= sum;
  } else {
    for (int e = lane; e < E; e += 32) score[e] = 1.0f / (1.0f + expf(-x[e]));
  }
  for (int e = lane; e < E; e += 32) choice[e] = bias ? score[e] + bias[e] : score[e];
  __syncwarp();

  if (sp.n_group > 1) {  // lane g owns group g: the sum of its two best choices
    const int per = E / sp.n_group;
    float gs = NAN;
    if (lane < sp.n_group) {
      float b1 = NAN, b2 = NAN;
      int i1 = 0x7fffffff, i2 = 0x7fffffff;
      for (int e = 0; e < per; ++e) {
        const float v = choice[lane * per + e];
        if (beats(v, e, b1, i1)) {
          b2 = b1, i2 = i1, b1 = v, i1 = e;
        } else if (beats(v, e, b2, i2)) {
          b2 = v, i2 = e;
        }
      }
      gs = b1 + b2;
    }
    unsigned keep = 0;
    for (int r = 0; r < sp.topk_group; ++r) {
      float v = (keep >> lane) & 1u ? NAN : gs;
      int i = lane < sp.n_group ? lane : 0x7fffffff;
      warp_argmax(v, i);
      keep |= 1u << i;
    }
    for (int e = lane; e < E; e += 32)
      if (!((keep >> (e / per)) & 1u)) choice[e] = 0.0f;
    __syncwarp();
  }

  float w_mine = 0.0f;  // lane j < K keeps slot j
  int id_mine = -1;
  for (int j = 0; j < K; ++j) {
    float v = NAN;
    int i = 0x7fffffff;
    for (int e = lane; e < E; e += 32) better(v, i, choice[e], e);
    warp_argmax(v, i);
    if (lane == j) id_mine = i, w_mine = score[i];
    if ((i & 31) == lane) choice[i] = NAN;  // taken
    __syncwarp();
  }
  // Sum in slot order on one lane, as the reference's sequential loop.
  float sum = 0.0f;
  for (int j = 0; j < K; ++j) sum += __shfl_sync(0xffffffffu, w_mine, j);
  if (lane < K) {
    float w = w_mine;
    if (sp.norm_topk_prob) w /= sum + 1e-20f;
    ids[static_cast<size_t>(t) * S + lane] = id_mine;
    wout[static_cast<size_t>(t) * S + lane] = w * sp.scaling;
  }
  if (sp.shared && lane == 0) {
    ids[static_cast<size_t>(t) * S + K] = E;
    wout[static_cast<size_t>(t) * S + K] = sp.shared_gated ? 1.0f / (1.0f + expf(-x[E])) : 1.0f;
  }
}

}  // namespace

bool moe_route_supported(const MoeRouteSpec& sp) {
  return sp.num_experts >= 1 && sp.num_experts <= kMoeRouteMaxExperts && sp.top_k >= 1 && sp.top_k <= 32 &&
         sp.top_k <= sp.num_experts && sp.n_group >= 1 && sp.n_group <= kMoeRouteMaxGroups &&
         sp.num_experts % sp.n_group == 0 && sp.topk_group >= 1 && sp.topk_group <= sp.n_group;
}

Status moe_route(const MoeRouteSpec& sp, const float* logits, int n, const float* bias, int32_t* ids,
                 float* w, cudaStream_t s) {
  if (n <= 0) return ok_status();
  if (!moe_route_supported(sp))
    return make_error("moe_route: " + std::to_string(sp.num_experts) + " experts, top " +
                          std::to_string(sp.top_k) + ", " + std::to_string(sp.n_group) +
                          " groups is outside the device router",
                      "a caller bug: check moe_route_supported first");
  const size_t smem = static_cast<size_t>(kWarps) * 2 * sp.num_experts * sizeof(float);
  moe_route_kernel<<<(n + kWarps - 1) / kWarps, 32 * kWarps, smem, s>>>(sp, logits, n, bias, ids, w);
  SPK_CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace spk::cuda
