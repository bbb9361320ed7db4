// Tiled (flash-style) causal attention for prefill chunks over the paged KV cache.
//
// One block per (query tile of <= 64 consecutive tokens of one sequence, q head). Keys stream through
// shared memory 32 at a time (bf16 -> fp32); each query is owned by two threads that split the head
// dimension, combine the q.k partial sums with one shuffle, and keep an online softmax.
// Work: 4 * D * (keys visible) FLOP per (query, head); a 1k-token prompt on the 8B shape is ~275 GFLOP
// over all layers, run on the fp32 SIMT units (~60 TFLOP/s peak) instead of tensor cores. The per-key
// scalar loop of the decode kernel costs ~10x more here because every query re-reads every key.
#include <cfloat>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace spk::cuda {
namespace {

constexpr int kTileQ = 64;
constexpr int kTileK = 32;
constexpr int kThreads = 2 * kTileQ;

template <int D>
__global__ void __launch_bounds__(kThreads)
    prefill_attention_kernel(const float* __restrict__ q, const bf16* __restrict__ k_cache,
                             const bf16* __restrict__ v_cache, const int2* __restrict__ tiles,
                             const int32_t* __restrict__ table_offset, const int32_t* __restrict__ positions,
                             const int32_t* __restrict__ block_tables, int hq, int hk, int bs, int window,
                             float scale, float* __restrict__ out) {
  constexpr int H2 = D / 2;
  constexpr int kRow = D + 4;  // half 1 starts 4 floats later: the two halves sit in different banks
  __shared__ __align__(16) float Ks[kTileK][kRow];
  __shared__ __align__(16) float Vs[kTileK][kRow];

  const int2 tile = tiles[blockIdx.x];
  const int h = blockIdx.y, kvh = h / (hq / hk);
  const int qi = threadIdx.x >> 1, half = threadIdx.x & 1;
  const bool active = qi < tile.y;
  const int t = tile.x + min(qi, tile.y - 1);
  const int pos = positions[t];
  const int pos_first = positions[tile.x], pos_last = positions[tile.x + tile.y - 1];
  const int key_first = window > 0 ? max(0, pos_first - window + 1) : 0;
  const int32_t* table = block_tables + table_offset[tile.x];
  const int off = half * (H2 + 4);

  float qr[H2], acc[H2];
  const float* qp = q + (static_cast<int64_t>(t) * hq + h) * D + half * H2;
#pragma unroll
  for (int i = 0; i < H2; ++i) {
    qr[i] = qp[i] * scale;
    acc[i] = 0.0f;
  }
  float m = -FLT_MAX, l = 0.0f;

  for (int kb = key_first; kb <= pos_last; kb += kTileK) {
    __syncthreads();
    for (int e = threadIdx.x; e < kTileK * H2; e += kThreads) {  // bf16 pairs
      const int j = e / H2, d = 2 * (e % H2);
      const int key = kb + j;
      float2 kv = make_float2(0.0f, 0.0f), vv = make_float2(0.0f, 0.0f);
      if (key <= pos_last) {
        const int64_t slot = static_cast<int64_t>(table[key / bs]) * bs + key % bs;
        const int64_t base = (slot * hk + kvh) * D + d;
        kv = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(k_cache + base));
        vv = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(v_cache + base));
      }
      const int col = d + (d >= H2 ? 4 : 0);
      Ks[j][col] = kv.x;
      Ks[j][col + 1] = kv.y;
      Vs[j][col] = vv.x;
      Vs[j][col + 1] = vv.y;
    }
    __syncthreads();
    const int nk = min(kTileK, pos_last - kb + 1);
    for (int j = 0; j < nk; ++j) {
      const float4* kr = reinterpret_cast<const float4*>(&Ks[j][off]);
      float s = 0.0f;
#pragma unroll
      for (int i = 0; i < H2 / 4; ++i) {
        const float4 k4 = kr[i];
        s = fmaf(qr[4 * i], k4.x, s);
        s = fmaf(qr[4 * i + 1], k4.y, s);
        s = fmaf(qr[4 * i + 2], k4.z, s);
        s = fmaf(qr[4 * i + 3], k4.w, s);
      }
      s += __shfl_xor_sync(0xffffffffu, s, 1);
      const int key = kb + j;
      if (active && key <= pos && (window <= 0 || pos - key < window)) {
        const float m_new = fmaxf(m, s);
        const float corr = __expf(m - m_new), p = __expf(s - m_new);
        l = l * corr + p;
        const float4* vr = reinterpret_cast<const float4*>(&Vs[j][off]);
#pragma unroll
        for (int i = 0; i < H2 / 4; ++i) {
          const float4 v4 = vr[i];
          acc[4 * i] = fmaf(p, v4.x, acc[4 * i] * corr);
          acc[4 * i + 1] = fmaf(p, v4.y, acc[4 * i + 1] * corr);
          acc[4 * i + 2] = fmaf(p, v4.z, acc[4 * i + 2] * corr);
          acc[4 * i + 3] = fmaf(p, v4.w, acc[4 * i + 3] * corr);
        }
        m = m_new;
      }
    }
  }
  if (active) {
    float* op = out + (static_cast<int64_t>(t) * hq + h) * D + half * H2;
    const float inv = 1.0f / l;
#pragma unroll
    for (int i = 0; i < H2; ++i) op[i] = acc[i] * inv;
  }
}

}  // namespace

bool prefill_attention_supports(int head_dim) { return head_dim == 64 || head_dim == 128; }

Status prefill_attention(const float* q, const bf16* k_cache, const bf16* v_cache, const int2* tiles,
                         int n_tiles, const int32_t* table_offset, const int32_t* positions,
                         const int32_t* block_tables, int n_q_heads, int n_kv_heads, int head_dim,
                         int block_size, int window, float scale, float* out, cudaStream_t s) {
  if (n_tiles == 0) return ok_status();
  dim3 grid(n_tiles, n_q_heads);
  if (head_dim == 128)
    prefill_attention_kernel<128><<<grid, kThreads, 0, s>>>(q, k_cache, v_cache, tiles, table_offset,
                                                            positions, block_tables, n_q_heads, n_kv_heads,
                                                            block_size, window, scale, out);
  else if (head_dim == 64)
    prefill_attention_kernel<64><<<grid, kThreads, 0, s>>>(q, k_cache, v_cache, tiles, table_offset,
                                                           positions, block_tables, n_q_heads, n_kv_heads,
                                                           block_size, window, scale, out);
  else
    return make_error("prefill_attention: head_dim " + std::to_string(head_dim) + " not supported",
                      "use paged_attention");
  SPK_CUDA_LAUNCH_CHECK();
  return ok_status();
}

}  // namespace spk::cuda
