#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/moe/moe_plan.h"

namespace spk::cuda::moe {
namespace {

constexpr int kPlanThreads = 1024;

// Exclusive prefix sum over the warp's lanes.
__device__ __forceinline__ int warp_exclusive(int v, int lane) {
  int incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const int up = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += up;
  }
  return incl - v;
}

__global__ void plan_kernel(const int32_t* __restrict__ ids, int nk, int E, Plan p) {
  __shared__ int cnt[kMaxExperts];
  __shared__ int cur[kMaxExperts];
  for (int e = threadIdx.x; e < E; e += blockDim.x) cnt[e] = 0;
  __syncthreads();
  for (int s = threadIdx.x; s < nk; s += blockDim.x) {
    const int e = ids[s];
    if (e >= 0 && e < E) atomicAdd(&cnt[e], 1);
  }
  __syncthreads();
  if (threadIdx.x < 32) {  // warp 0: lane l owns experts [l * per, (l + 1) * per)
    const int lane = threadIdx.x, per = (E + 31) / 32;
    const int lo = min(E, lane * per), hi = min(E, lo + per);
    int slots = 0, active = 0, tiles = 0;
    for (int e = lo; e < hi; ++e) {
      slots += cnt[e];
      active += cnt[e] > 0;
      tiles += (cnt[e] + kTileRows - 1) / kTileRows;
    }
    int off = warp_exclusive(slots, lane), a = warp_exclusive(active, lane), t = warp_exclusive(tiles, lane);
    for (int e = lo; e < hi; ++e) {
      const int c = cnt[e];
      cur[e] = off;
      if (c > 0) {
        p.act_expert[a] = e;
        p.act_off[a] = off;
        p.act_cnt[a] = c;
        for (int r = 0; r < c; r += kTileRows, ++t) {
          p.tile_act[t] = a;
          p.tile_row0[t] = r;
        }
        ++a;
      }
      off += c;
    }
    if (lane == 31) {
      *p.n_active = a;
      *p.n_tiles = t;
    }
  }
  __syncthreads();
  for (int s = threadIdx.x; s < nk; s += blockDim.x) {
    const int e = ids[s];
    if (e >= 0 && e < E) p.order[atomicAdd(&cur[e], 1)] = s;
  }
}

// grid (ceil(d / 256), n): one thread per (token, output element).
__global__ void combine_kernel(const int32_t* __restrict__ ids, const float* __restrict__ w, int n_experts,
                               int k, int d, const float* __restrict__ y, float* __restrict__ out) {
  const int t = blockIdx.y, r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= d) return;
  const int32_t* id = ids + static_cast<size_t>(t) * k;
  float acc = 0.0f;
  int last = -1;
  for (int done = 0; done < k; ++done) {  // k is small: a scan per slot finds the next expert up
    int pick_e = 0x7fffffff;
    for (int j = 0; j < k; ++j) {
      const int e = id[j];
      if (e >= 0 && e < n_experts && e > last && e < pick_e) pick_e = e;
    }
    if (pick_e == 0x7fffffff) break;
    last = pick_e;
    for (int j = 0; j < k; ++j)
      if (id[j] == pick_e)
        acc += w[static_cast<size_t>(t) * k + j] * y[(static_cast<size_t>(t) * k + j) * d + r];
  }
  out[static_cast<size_t>(t) * d + r] = acc;
}

}  // namespace

Status build_plan(const int32_t* ids, int nk, int E, const Plan& p, cudaStream_t s) {
  if (E > kMaxExperts)
    return make_error(
        "moe plan: " + std::to_string(E) + " experts (at most " + std::to_string(kMaxExperts) + ")",
        "a model with more experts needs a wider plan histogram");
  plan_kernel<<<1, kPlanThreads, 0, s>>>(ids, nk, E, p);
  SPK_CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

Status combine(const int32_t* ids, const float* w, int n_experts, int n, int k, int d, const float* y,
               float* out, cudaStream_t s) {
  combine_kernel<<<dim3((d + 255) / 256, n), 256, 0, s>>>(ids, w, n_experts, k, d, y, out);
  SPK_CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace spk::cuda::moe
