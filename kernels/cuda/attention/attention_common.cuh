// Shared by the paged-attention kernels (attention.cu: one block per query head; attention_gqa.cu: one
// block per kv head and its GQA group): launch shape, the visible-key range of a split, and the merge of
// split-KV partials.
#pragma once

#include <cfloat>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.h"

namespace spk::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kMaxElems = 8;  // head_dim <= 256
constexpr int kUnroll = 4;    // keys in flight per warp: their loads are independent

// The first key a token at `pos` sees (window <= 0: full attention).
__device__ __forceinline__ int first_visible(int pos, int window) {
  return window > 0 ? max(0, pos - window + 1) : 0;
}

// The keys [first, last] that split `split` of `n_splits` takes for a token at `pos`: a contiguous share
// of the visible ones (window <= 0: all of 0..pos). Empty (first > last) when the share runs out.
struct KeyRange {
  int first, last;
};
__device__ __forceinline__ KeyRange split_keys(int pos, int window, int split, int n_splits) {
  const int visible_first = first_visible(pos, window);
  const int chunk = (pos - visible_first + n_splits) / n_splits;
  const int first = visible_first + split * chunk;
  return {first, min(pos, first + chunk - 1)};
}

constexpr int kMaxSplits = 16;

// The output rows of `group` consecutive heads from their splits' partials, by one whole block:
// head g's split s is at partial[(g * stride + s) * (d + 2)] = [M, L, unnormalised acc[d]] (L == 0: the
// split saw no key). Every load of a round is independent of the others, so each round costs about one
// L2 round trip: M and L of every (split, head), then the acc values. Loads bypass L1: the partials come
// from other blocks of the grid.
template <int G>
__device__ void merge_group(const float* partial, int stride, int n_splits, int group, int d, float* out) {
  __shared__ float sw[kMaxSplits][G];
  __shared__ float sl[kMaxSplits][G];
  const int i = threadIdx.x;
  if (i < n_splits * group) {
    const int s = i / group, g = i % group;
    const float* pp = partial + (static_cast<int64_t>(g) * stride + s) * (d + 2);
    sw[s][g] = __ldcg(pp);
    sl[s][g] = __ldcg(pp + 1);
  }
  __syncthreads();
  if (i < group) {  // sw[s][i] becomes split s's weight in head i's output
    float M = -FLT_MAX;
    for (int s = 0; s < n_splits; ++s)
      if (sl[s][i] > 0.0f) M = fmaxf(M, sw[s][i]);
    float L = 0.0f;
    for (int s = 0; s < n_splits; ++s)
      if (sl[s][i] > 0.0f) L += sl[s][i] * __expf(sw[s][i] - M);
    for (int s = 0; s < n_splits; ++s) sw[s][i] = sl[s][i] > 0.0f ? __expf(sw[s][i] - M) / L : 0.0f;
  }
  __syncthreads();
  for (int idx = i; idx < group * d; idx += blockDim.x) {
    const int g = idx / d, e = idx % d;
    const float* pp = partial + static_cast<int64_t>(g) * stride * (d + 2) + 2 + e;
    float v = 0.0f;
#pragma unroll
    for (int s = 0; s < kMaxSplits; ++s)
      if (s < n_splits) v = fmaf(sw[s][g], __ldcg(pp + s * (d + 2)), v);
    out[idx] = v;
  }
}

}  // namespace

// The shared-KV kernel's launch (attention_gqa.cu), ROPE false: plain decode/prefill rows.
cudaError_t launch_paged_attention_gqa(int head_dim, int group, dim3 grid, cudaStream_t s, const float* q,
                                       const bf16* k_cache, const bf16* v_cache, const int32_t* table_offset,
                                       const int32_t* positions, const int32_t* block_tables, int hq, int hk,
                                       int bs, int window, float scale, float* out, float* partial,
                                       int* counters);

}  // namespace spk::cuda
