// Paged attention over a flattened varlen batch (decode tokens and prefill chunks alike).
//
// One block per (token, q head); its 8 warps split the visible keys (4 in flight per warp, so the
// dependent k-load -> dot -> reduce chain of one key overlaps the next) and keep an online softmax each
// (running max m, sum l, weighted V acc), merged at the end through shared memory. A lane owns head
// elements d = lane + 32 i, so the q.k dot is a per-lane FMA chain plus one warp reduction per key.
// Cost per (token, head): reads ctx * D * 2 (K+V) bf16 values. At decode with short contexts this is
// small next to the weight stream; long contexts split the keys across blocks (split-KV) and a second
// kernel merges the softmax partials.
//
// With GQA (G = hq / hk query heads per kv head) the per-head kernel reads every K/V row G times. The
// shared kernel (paged_attention_gqa_kernel) takes one block per (token, kv head, split) instead: each
// K/V row is loaded once, as one vector load per lane, and serves the G heads of its group. At batch 32
// of an 8B model (G = 4) that cuts the step's attention reads 4x.
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

__global__ void __launch_bounds__(kWarps * 32)
    paged_attention_kernel(const float* __restrict__ q, const bf16* __restrict__ k_cache,
                           const bf16* __restrict__ v_cache, const int32_t* __restrict__ table_offset,
                           const int32_t* __restrict__ positions, const int32_t* __restrict__ block_tables,
                           int hq, int hk, int d, int bs, int window, float scale, float* __restrict__ out,
                           float* __restrict__ partial) {
  pdl_begin();
  const int t = blockIdx.x, h = blockIdx.y;
  const int split = blockIdx.z, n_splits = gridDim.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int kvh = h / (hq / hk);
  const auto [first, last] = split_keys(positions[t], window, split, n_splits);  // split-KV share
  const int32_t* table = block_tables + table_offset[t];
  const int E = (d + 31) / 32;

  float qr[kMaxElems], acc[kMaxElems];
  const float* qp = q + (static_cast<int64_t>(t) * hq + h) * d;
#pragma unroll
  for (int i = 0; i < kMaxElems; ++i) {
    const int e = lane + 32 * i;
    qr[i] = (i < E && e < d) ? qp[e] * scale : 0.0f;
    acc[i] = 0.0f;
  }
  float m = -FLT_MAX, l = 0.0f;
  // Warp w takes keys first + w*U + {0..U-1}, then strides by kWarps*U.
  for (int j0 = first + warp * kUnroll; j0 <= last; j0 += kWarps * kUnroll) {
    const bf16* kp[kUnroll];
    const bf16* vp[kUnroll];
    float dot[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = min(j0 + u, last);  // out-of-range keys re-read the last one and are masked below
      const int64_t slot = static_cast<int64_t>(table[j / bs]) * bs + j % bs;
      kp[u] = k_cache + (slot * hk + kvh) * d;
      vp[u] = v_cache + (slot * hk + kvh) * d;
      dot[u] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kMaxElems; ++i) {
      const int e = lane + 32 * i;
      if (i < E && e < d) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) dot[u] = fmaf(qr[i], __bfloat162float(kp[u][e]), dot[u]);
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) dot[u] += __shfl_xor_sync(0xffffffffu, dot[u], o);
    float m_new = m;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (j0 + u > last) dot[u] = -FLT_MAX;
      m_new = fmaxf(m_new, dot[u]);
    }
    const float corr = __expf(m - m_new);
    float p[kUnroll];
    l *= corr;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      p[u] = j0 + u > last ? 0.0f : __expf(dot[u] - m_new);
      l += p[u];
    }
#pragma unroll
    for (int i = 0; i < kMaxElems; ++i) {
      const int e = lane + 32 * i;
      if (i < E && e < d) {
        float a = acc[i] * corr;
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) a = fmaf(p[u], __bfloat162float(vp[u][e]), a);
        acc[i] = a;
      }
    }
    m = m_new;
  }

  __shared__ float sm[kWarps], sl[kWarps];
  __shared__ float sacc[kWarps][kMaxElems * 32];
  if (lane == 0) {
    sm[warp] = m;
    sl[warp] = l;
  }
#pragma unroll
  for (int i = 0; i < kMaxElems; ++i) sacc[warp][lane + 32 * i] = acc[i];
  __syncthreads();
  float M = -FLT_MAX;
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, sm[w]);
  float L = 0.0f;
  for (int w = 0; w < kWarps; ++w) L += sl[w] > 0.0f ? sl[w] * __expf(sm[w] - M) : 0.0f;
  if (n_splits == 1) {
    float* op = out + (static_cast<int64_t>(t) * hq + h) * d;
    for (int e = threadIdx.x; e < d; e += blockDim.x) {
      float v = 0.0f;
      for (int w = 0; w < kWarps; ++w)
        if (sl[w] > 0.0f) v += sacc[w][e] * __expf(sm[w] - M);
      op[e] = v / L;
    }
    return;
  }
  // Partial result of this split: [M, L, unnormalised acc[d]], merged by combine_splits_kernel.
  float* pp = partial + ((static_cast<int64_t>(t) * hq + h) * n_splits + split) * (d + 2);
  if (threadIdx.x == 0) {
    pp[0] = M;
    pp[1] = L;
  }
  for (int e = threadIdx.x; e < d; e += blockDim.x) {
    float v = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (sl[w] > 0.0f) v += sacc[w][e] * __expf(sm[w] - M);
    pp[2 + e] = v;
  }
}

__global__ void combine_splits_kernel(const float* __restrict__ partial, int n_splits, int d,
                                      float* __restrict__ out) {
  pdl_begin();
  const int64_t th = blockIdx.x;  // token * hq + head
  merge_group<1>(partial + th * n_splits * (d + 2), n_splits, n_splits, 1, d, out + th * d);
}

// E bf16 values (a lane's share of one K or V row) as one load: 4, 8 or 16 bytes.
template <int E>
struct RowVec;
template <>
struct RowVec<2> {
  using T = unsigned int;
};
template <>
struct RowVec<4> {
  using T = uint2;
};
template <>
struct RowVec<8> {
  using T = uint4;
};

template <int E>
__device__ __forceinline__ void to_floats(const typename RowVec<E>::T& v, float* f) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < E / 2; ++i) {
    const float2 x = __bfloat1622float2(h[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

template <int E>
__device__ __forceinline__ typename RowVec<E>::T to_row_vec(const float (&f)[E]) {
  typename RowVec<E>::T v;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&v);
#pragma unroll
  for (int i = 0; i < E / 2; ++i) h[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return v;
}

// Neox RoPE (rotate_half) of a lane's E elements of one head row: with D = 32 E, element e pairs with
// e + D / 2, which lane ^ 16 holds at the same index i (frequency (lane & 15) * E + i). Same arithmetic as
// rope_token in elementwise.cu.
template <int E>
__device__ __forceinline__ void rotate_row(float (&x)[E], const float (&cs)[E], const float (&sn)[E],
                                           int lane) {
#pragma unroll
  for (int i = 0; i < E; ++i) {
    const float o = __shfl_xor_sync(0xffffffffu, x[i], 16);
    x[i] = lane < 16 ? x[i] * cs[i] - o * sn[i] : x[i] * cs[i] + o * sn[i];
  }
}

// One block per (token, kv head, split); G >= hq / hk heads per group (unused ones are masked), head_dim
// = 32 * E with lane l owning elements [l * E, l * E + E). Warps take U keys at a time (their K and V
// loads are issued together) and keep an online softmax per head, merged through shared memory.
//
// ROPE (paged_attention_rope, decode steps): q and k arrive unrotated. Every block rotates its group's q;
// the block whose share of the keys holds the new one (at pos) rotates k, writes k and v to the caches
// and hands that row to its warps through shared memory; the block that merges the splits writes q back
// rotated (no block may overwrite q while others still read it). No kernel of the step writes the keys
// before pos, so a warp loads its first keys before waiting for the q/k/v projection.
template <int E, int G, int U, bool ROPE>
__global__ void __launch_bounds__(kWarps * 32)
    paged_attention_gqa_kernel(const float* __restrict__ q, const bf16* __restrict__ k_cache,
                               const bf16* __restrict__ v_cache, const int32_t* __restrict__ table_offset,
                               const int32_t* __restrict__ positions,
                               const int32_t* __restrict__ block_tables, int hq, int hk, int bs, int window,
                               float scale, float* __restrict__ out, float* __restrict__ partial,
                               int* __restrict__ counters, DecodeRope rope) {
  constexpr int D = 32 * E;
  using Vec = typename RowVec<E>::T;
  const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int group = hq / hk, h0 = kvh * group;
  // The step's metadata is copied in before its first kernel: readable before the wait.
  const int pos = positions[t];
  // Splits in use: as many as give each split one pass of its warps (U keys each), at most the grid's.
  // The merge's cost grows with the splits, and a short context gains nothing from more. (With the
  // combine kernel, which reads every split's partial, all of them.)
  const int S = gridDim.z;  // the partials' stride
  const int visible = pos - first_visible(pos, window) + 1;
  const int n_splits = counters ? min(S, (visible + kWarps * U - 1) / (kWarps * U)) : S;
  if (split >= n_splits) return;
  const KeyRange keys = split_keys(pos, window, split, n_splits);  // split-KV share
  const int first = keys.first, last = keys.last;
  const int32_t* table = block_tables + table_offset[t];

  Vec kraw[U], vraw[U];
  auto load_keys = [&](int j0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int j = min(j0 + u, last);  // out-of-range keys re-read the last one and are masked below
      const int64_t slot = static_cast<int64_t>(table[j / bs]) * bs + j % bs;
      const int64_t off = (slot * hk + kvh) * D + lane * E;
      kraw[u] = *reinterpret_cast<const Vec*>(k_cache + off);
      vraw[u] = *reinterpret_cast<const Vec*>(v_cache + off);
    }
  };
  int j0 = first + warp * U;
  float cs[E], sn[E];
  if constexpr (ROPE) {
    if (j0 <= last) load_keys(j0);  // key pos among them is stale: replaced below
    const float p = static_cast<float>(pos);
#pragma unroll
    for (int i = 0; i < E; ++i) sincosf(p * rope.inv_freq[(lane & 15) * E + i], &sn[i], &cs[i]);
  }
  pdl_begin();

  // ROPE: whether this block's share of the keys holds the new one; its warp 0 caches that row.
  const bool owner = ROPE && warp == 0 && first <= pos && pos <= last;
  const int64_t new_row = (static_cast<int64_t>(t) * hk + kvh) * D + lane * E;
  float kf[E], vf[E];
  if (owner) {
#pragma unroll
    for (int i = 0; i < E; ++i) {
      kf[i] = rope.k[new_row + i];
      vf[i] = rope.v[new_row + i];
    }
  }
  float qr[G][E], acc[G][E], m[G], l[G];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const float* qp =
        (ROPE ? rope.q : q) + (static_cast<int64_t>(t) * hq + h0 + min(g, group - 1)) * D + lane * E;
    float x[E];
#pragma unroll
    for (int i = 0; i < E; ++i) x[i] = qp[i];
    if constexpr (ROPE) rotate_row<E>(x, cs, sn, lane);
#pragma unroll
    for (int i = 0; i < E; ++i) {
      qr[g][i] = g < group ? x[i] * scale : 0.0f;
      acc[g][i] = 0.0f;
    }
    m[g] = -FLT_MAX;
    l[g] = 0.0f;
  }
  __shared__ Vec knew[32], vnew[32];  // ROPE: the new key's K and V rows, as cached
  if constexpr (ROPE) {
    if (owner) {
      rotate_row<E>(kf, cs, sn, lane);
#pragma unroll
      for (int i = 0; i < E; ++i) rope.k[new_row + i] = kf[i];
      const Vec kb = to_row_vec<E>(kf), vb = to_row_vec<E>(vf);
      const int64_t dst = (static_cast<int64_t>(rope.slots[t]) * hk + kvh) * D + lane * E;
      *reinterpret_cast<Vec*>(rope.k_cache + dst) = kb;
      *reinterpret_cast<Vec*>(rope.v_cache + dst) = vb;
      knew[lane] = kb;
      vnew[lane] = vb;
    }
    __syncthreads();
  }
  // Writes this group's q rotated (ROPE), once no block of this (token, kv head) reads it any more.
  auto write_rotated_q = [&] {
    if constexpr (ROPE) {
      if (warp != 0) return;
      for (int g = 0; g < group; ++g) {
        float* qp = rope.q + (static_cast<int64_t>(t) * hq + h0 + g) * D + lane * E;
        float x[E];
#pragma unroll
        for (int i = 0; i < E; ++i) x[i] = qp[i];
        rotate_row<E>(x, cs, sn, lane);
#pragma unroll
        for (int i = 0; i < E; ++i) qp[i] = x[i];
      }
    }
  };

  for (bool loaded = ROPE; j0 <= last; j0 += kWarps * U, loaded = false) {
    if (!loaded) load_keys(j0);
    if constexpr (ROPE) {
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (min(j0 + u, last) == pos) {
          kraw[u] = knew[lane];
          vraw[u] = vnew[lane];
        }
    }
    float dot[U][G];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      float kf[E];
      to_floats<E>(kraw[u], kf);
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float a = 0.0f;
#pragma unroll
        for (int i = 0; i < E; ++i) a = fmaf(qr[g][i], kf[i], a);
        dot[u][g] = a;
      }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int g = 0; g < G; ++g) dot[u][g] += __shfl_xor_sync(0xffffffffu, dot[u][g], o);
    float vf[U][E];
#pragma unroll
    for (int u = 0; u < U; ++u) to_floats<E>(vraw[u], vf[u]);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float m_new = m[g];
#pragma unroll
      for (int u = 0; u < U; ++u)
        if (j0 + u <= last) m_new = fmaxf(m_new, dot[u][g]);
      const float corr = __expf(m[g] - m_new);
      float p[U];
      l[g] *= corr;
#pragma unroll
      for (int u = 0; u < U; ++u) {
        p[u] = j0 + u > last ? 0.0f : __expf(dot[u][g] - m_new);
        l[g] += p[u];
      }
#pragma unroll
      for (int i = 0; i < E; ++i) {
        float a = acc[g][i] * corr;
#pragma unroll
        for (int u = 0; u < U; ++u) a = fmaf(p[u], vf[u][i], a);
        acc[g][i] = a;
      }
      m[g] = m_new;
    }
  }

  __shared__ float sm[kWarps][G], sl[kWarps][G];
  __shared__ float sacc[kWarps][G][D];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    if (lane == 0) {
      sm[warp][g] = m[g];
      sl[warp][g] = l[g];
    }
#pragma unroll
    for (int i = 0; i < E; ++i) sacc[warp][g][lane * E + i] = acc[g][i];
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < group * D; idx += blockDim.x) {
    const int g = idx / D, e = idx % D;
    float M = -FLT_MAX;
    for (int w = 0; w < kWarps; ++w)
      if (sl[w][g] > 0.0f) M = fmaxf(M, sm[w][g]);
    float L = 0.0f, v = 0.0f;
    for (int w = 0; w < kWarps; ++w)
      if (sl[w][g] > 0.0f) {
        const float c = __expf(sm[w][g] - M);
        L += sl[w][g] * c;
        v += sacc[w][g][e] * c;
      }
    const int64_t th = static_cast<int64_t>(t) * hq + h0 + g;
    if (n_splits == 1) {
      out[th * D + e] = v / L;
    } else {  // partial of this split: [M, L, unnormalised acc[D]], merged below or by combine_splits_kernel
      float* pp = partial + (th * S + split) * (D + 2);
      if (e == 0) {
        pp[0] = M;
        pp[1] = L;
      }
      pp[2 + e] = v;
    }
  }
  if (n_splits == 1) write_rotated_q();
  if (n_splits == 1 || counters == nullptr) return;
  // The last split block of this (token, kv head) to finish merges all splits' partials, so no second
  // kernel is launched: publish this block's partials, count it, and let the last one read them all.
  __shared__ bool merger;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int* c = counters + static_cast<int64_t>(t) * hk + kvh;
    merger = atomicAdd(c, 1) == n_splits - 1;
    if (merger) *c = 0;  // every split has counted: ready for the next launch
  }
  __syncthreads();
  if (!merger) return;
  __threadfence();
  const int64_t th0 = static_cast<int64_t>(t) * hq + h0;
  merge_group<G>(partial + th0 * S * (D + 2), S, n_splits, group, D, out + th0 * D);
  write_rotated_q();
}

template <int E, bool ROPE>
cudaError_t launch_gqa(int group, dim3 grid, cudaStream_t s, const float* q, const bf16* k_cache,
                       const bf16* v_cache, const int32_t* table_offset, const int32_t* positions,
                       const int32_t* block_tables, int hq, int hk, int bs, int window, float scale,
                       float* out, float* partial, int* counters, const DecodeRope& rope) {
#define SPK_GQA(G, U)                                                                                  \
  return launch_kernel(paged_attention_gqa_kernel<E, G, U, ROPE>, grid, kWarps * 32, 0, s, q, k_cache, \
                       v_cache, table_offset, positions, block_tables, hq, hk, bs, window, scale, out, \
                       partial, counters, rope)
  if (group <= 1) SPK_GQA(1, 4);
  if (group <= 2) SPK_GQA(2, 4);
  if (group <= 4 || E == 8) SPK_GQA(4, 4);
  if constexpr (E <= 4) SPK_GQA(8, 2);
#undef SPK_GQA
  return cudaErrorInvalidValue;
}

template <bool ROPE>
cudaError_t launch_gqa_dim(int head_dim, int group, dim3 grid, cudaStream_t s, const float* q,
                           const bf16* k_cache, const bf16* v_cache, const int32_t* table_offset,
                           const int32_t* positions, const int32_t* block_tables, int hq, int hk, int bs,
                           int window, float scale, float* out, float* partial, int* counters,
                           const DecodeRope& rope) {
  if (head_dim == 64)
    return launch_gqa<2, ROPE>(group, grid, s, q, k_cache, v_cache, table_offset, positions, block_tables, hq,
                               hk, bs, window, scale, out, partial, counters, rope);
  if (head_dim == 128)
    return launch_gqa<4, ROPE>(group, grid, s, q, k_cache, v_cache, table_offset, positions, block_tables, hq,
                               hk, bs, window, scale, out, partial, counters, rope);
  return launch_gqa<8, ROPE>(group, grid, s, q, k_cache, v_cache, table_offset, positions, block_tables, hq,
                             hk, bs, window, scale, out, partial, counters, rope);
}

}  // namespace

bool paged_attention_shares_kv(int n_q_heads, int n_kv_heads, int head_dim) {
  if (n_kv_heads < 1 || n_q_heads % n_kv_heads != 0) return false;
  const int group = n_q_heads / n_kv_heads;
  return ((head_dim == 64 || head_dim == 128) && group <= 8) || (head_dim == 256 && group <= 4);
}

Status paged_attention(const float* q, const bf16* k_cache, const bf16* v_cache, const int32_t* table_offset,
                       const int32_t* positions, const int32_t* block_tables, int n_tokens, int n_q_heads,
                       int n_kv_heads, int head_dim, int block_size, int window, float scale, float* out,
                       cudaStream_t s, int n_splits, float* partial, bool share_kv, int* split_counters) {
  if (n_splits < 1 || n_splits > kMaxSplits || (n_splits > 1 && partial == nullptr))
    return make_error("paged_attention: " + std::to_string(n_splits) + " splits (1.." +
                      std::to_string(kMaxSplits) + "; more than one needs a partial buffer)");
  if (head_dim > 32 * kMaxElems)
    return make_error("paged_attention: head_dim " + std::to_string(head_dim) + " > 256 is not supported");
  if (n_q_heads % n_kv_heads != 0)
    return make_error("paged_attention: " + std::to_string(n_q_heads) + " q heads not a multiple of " +
                      std::to_string(n_kv_heads) + " kv heads");
  if (n_tokens == 0) return ok_status();
  const bool shared = share_kv && paged_attention_shares_kv(n_q_heads, n_kv_heads, head_dim);
  int* counters = shared && n_splits > 1 ? split_counters : nullptr;  // merged in the kernel
  if (shared) {
    const dim3 grid(n_tokens, n_kv_heads, n_splits);
    SPK_CUDA_CHECK(launch_gqa_dim<false>(head_dim, n_q_heads / n_kv_heads, grid, s, q, k_cache, v_cache,
                                         table_offset, positions, block_tables, n_q_heads, n_kv_heads,
                                         block_size, window, scale, out, partial, counters, DecodeRope{}));
  } else {
    const dim3 grid(n_tokens, n_q_heads, n_splits);
    SPK_LAUNCH(paged_attention_kernel, grid, kWarps * 32, 0, s, q, k_cache, v_cache, table_offset, positions,
               block_tables, n_q_heads, n_kv_heads, head_dim, block_size, window, scale, out, partial);
  }
  if (n_splits > 1 && counters == nullptr) {
    SPK_LAUNCH(combine_splits_kernel, n_tokens * n_q_heads, 128, 0, s, partial, n_splits, head_dim, out);
  }
  return ok_status();
}

Status paged_attention_rope(const DecodeRope& rope, const int32_t* table_offset, const int32_t* positions,
                            const int32_t* block_tables, int n_tokens, int n_q_heads, int n_kv_heads,
                            int head_dim, int block_size, int window, float scale, float* out, cudaStream_t s,
                            int n_splits, float* partial, int* split_counters) {
  if (!paged_attention_shares_kv(n_q_heads, n_kv_heads, head_dim))
    return make_error("paged_attention_rope: " + std::to_string(n_q_heads) + " q heads, " +
                      std::to_string(n_kv_heads) + " kv heads, head_dim " + std::to_string(head_dim) +
                      " have no shared-KV kernel");
  if (n_splits < 1 || n_splits > kMaxSplits ||
      (n_splits > 1 && (partial == nullptr || split_counters == nullptr)))
    return make_error("paged_attention_rope: " + std::to_string(n_splits) + " splits (1.." +
                      std::to_string(kMaxSplits) +
                      "; more than one needs a partial buffer and split counters)");
  if (!rope.q || !rope.k || !rope.v || !rope.inv_freq || !rope.slots || !rope.k_cache || !rope.v_cache)
    return make_error("paged_attention_rope: every DecodeRope pointer is needed");
  if (n_tokens == 0) return ok_status();
  const dim3 grid(n_tokens, n_kv_heads, n_splits);
  SPK_CUDA_CHECK(launch_gqa_dim<true>(
      head_dim, n_q_heads / n_kv_heads, grid, s, nullptr, rope.k_cache, rope.v_cache, table_offset, positions,
      block_tables, n_q_heads, n_kv_heads, block_size, window, scale, out, partial, split_counters, rope));
  return ok_status();
}

}  // namespace spk::cuda
