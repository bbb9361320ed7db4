// Paged attention, shared-KV form (see attention.cu for the per-head form and the cost model): one block
// per (token, kv head, split) whose K/V rows are loaded once and serve the G query heads of the group;
// also the decode form with rope and the cache write folded in (paged_attention_rope).
#include "kernels/cuda/attention/attention_common.cuh"

namespace spk::cuda {
namespace {

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

cudaError_t launch_paged_attention_gqa(int head_dim, int group, dim3 grid, cudaStream_t s, const float* q,
                                       const bf16* k_cache, const bf16* v_cache, const int32_t* table_offset,
                                       const int32_t* positions, const int32_t* block_tables, int hq, int hk,
                                       int bs, int window, float scale, float* out, float* partial,
                                       int* counters) {
  return launch_gqa_dim<false>(head_dim, group, grid, s, q, k_cache, v_cache, table_offset, positions,
                               block_tables, hq, hk, bs, window, scale, out, partial, counters, DecodeRope{});
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
