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
#include "kernels/cuda/attention/attention_common.cuh"

namespace spk::cuda {
namespace {

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
    SPK_CUDA_CHECK(launch_paged_attention_gqa(head_dim, n_q_heads / n_kv_heads, grid, s, q, k_cache, v_cache,
                                              table_offset, positions, block_tables, n_q_heads, n_kv_heads,
                                              block_size, window, scale, out, partial, counters));
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

}  // namespace spk::cuda
