// Tiled (flash-style) causal attention for prefill chunks over the paged KV cache.
//
// One block per (query tile of <= 64 consecutive tokens of one sequence, q head). Keys stream through
// shared memory 32 at a time (bf16 -> fp32); each query is owned by two threads that split the head
// dimension, combine the q.k partial sums with one shuffle, and keep an online softmax.
// Work: 4 * D * (keys visible) FLOP per (query, head); a 1k-token prompt on the 8B shape is ~275 GFLOP
// over all layers, run on the fp32 SIMT units (~60 TFLOP/s peak) instead of tensor cores. The per-key
// scalar loop of the decode kernel costs ~10x more here because every query re-reads every key.
#include <cfloat>
#include <cstdlib>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/knobs.h"

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

// Tensor-core version (the default): flash-attention-2 style on mma.sync m16n8k16 (bf16 in, fp32
// accumulate). One block of 4 warps per (query tile of <= 64 tokens, q head); warp w owns query rows
// [16w, 16w + 16). Keys stream through shared memory 64 at a time: K row-major (S = Q K^T), V transposed
// (O += P V), both padded by 16 bytes a row so fragment loads hit 8 distinct bank groups. Q (scaled by
// scale * log2 e, softmax in exp2) and P are rounded to bf16 as flash-attention does: relative error
// ~3e-3 against an fp32 reference (the SIMT kernel above keeps q and p in fp32).
constexpr int kTcKeys = 64;
constexpr int kTcThreads = 128;

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int D>
__global__ void __launch_bounds__(kTcThreads)
    prefill_attention_tc_kernel(const float* __restrict__ q, const bf16* __restrict__ k_cache,
                                const bf16* __restrict__ v_cache, const int2* __restrict__ tiles,
                                const int32_t* __restrict__ table_offset,
                                const int32_t* __restrict__ positions,
                                const int32_t* __restrict__ block_tables, int hq, int hk, int bs, int window,
                                float scale, float* __restrict__ out) {
  constexpr int KP = D + 8;        // Ks row stride (bf16)
  constexpr int VP = kTcKeys + 8;  // Vt row stride (bf16)
  __shared__ __align__(16) bf16 Ks[kTcKeys * KP];
  __shared__ __align__(16) bf16 Vt[D * VP];

  const int2 tile = tiles[blockIdx.x];
  const int h = blockIdx.y, kvh = h / (hq / hk);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
  const int32_t* table = block_tables + table_offset[tile.x];
  const int r0 = warp * 16 + g, r1 = r0 + 8;  // tile-local query rows of this thread
  const int t0 = tile.x + min(r0, tile.y - 1), t1 = tile.x + min(r1, tile.y - 1);
  const int pos0 = positions[t0], pos1 = positions[t1];
  const int pos_first = positions[tile.x], pos_last = positions[tile.x + tile.y - 1];
  const int key_first = window > 0 ? max(0, pos_first - window + 1) : 0;

  const float sc = scale * 1.4426950408889634f;
  uint32_t qf[D / 16][4];
  {
    const float* q0 = q + (static_cast<int64_t>(t0) * hq + h) * D;
    const float* q1 = q + (static_cast<int64_t>(t1) * hq + h) * D;
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      const int c = kc * 16 + 2 * t4;
      qf[kc][0] = pack_bf16(q0[c] * sc, q0[c + 1] * sc);
      qf[kc][1] = pack_bf16(q1[c] * sc, q1[c + 1] * sc);
      qf[kc][2] = pack_bf16(q0[c + 8] * sc, q0[c + 9] * sc);
      qf[kc][3] = pack_bf16(q1[c + 8] * sc, q1[c + 9] * sc);
    }
  }
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;

  for (int kb = key_first; kb <= pos_last; kb += kTcKeys) {
    __syncthreads();  // the previous tile's readers are done
    for (int e = threadIdx.x; e < kTcKeys * (D / 8); e += kTcThreads) {
      const int j = e / (D / 8), c = (e % (D / 8)) * 8, key = kb + j;
      uint4 kv = make_uint4(0, 0, 0, 0), vv = make_uint4(0, 0, 0, 0);
      if (key <= pos_last) {
        const int64_t slot = static_cast<int64_t>(table[key / bs]) * bs + key % bs;
        const int64_t base = (slot * hk + kvh) * D + c;
        kv = *reinterpret_cast<const uint4*>(k_cache + base);
        vv = *reinterpret_cast<const uint4*>(v_cache + base);
      }
      *reinterpret_cast<uint4*>(&Ks[j * KP + c]) = kv;
      const bf16* vp = reinterpret_cast<const bf16*>(&vv);
#pragma unroll
      for (int i = 0; i < 8; ++i) Vt[(c + i) * VP + j] = vp[i];
    }
    __syncthreads();

    float s[kTcKeys / 8][4];
#pragma unroll
    for (int nt = 0; nt < kTcKeys / 8; ++nt) {
      s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
      const bf16* kr = &Ks[(nt * 8 + g) * KP + 2 * t4];
#pragma unroll
      for (int kc = 0; kc < D / 16; ++kc) {
        const uint32_t b0 = *reinterpret_cast<const uint32_t*>(kr + kc * 16);
        const uint32_t b1 = *reinterpret_cast<const uint32_t*>(kr + kc * 16 + 8);
        mma_bf16(s[nt], qf[kc], b0, b1);
      }
    }
    // Mask (causal, window), then the online softmax of rows r0 (s[.][0..1]) and r1 (s[.][2..3]).
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int nt = 0; nt < kTcKeys / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = kb + nt * 8 + 2 * t4 + (e & 1);
        const int pos = e < 2 ? pos0 : pos1;
        if (key > pos || (window > 0 && pos - key >= window)) s[nt][e] = -INFINITY;
        if (e < 2)
          mx0 = fmaxf(mx0, s[nt][e]);
        else
          mx1 = fmaxf(mx1, s[nt][e]);
      }
#pragma unroll
    for (int off = 1; off <= 2; off <<= 1) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, off));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, off));
    }
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    // A row with nothing visible yet keeps m = -inf: use 0 as the exponent base (all p are 0).
    const float b0 = mn0 == -INFINITY ? 0.0f : mn0, b1 = mn1 == -INFINITY ? 0.0f : mn1;
    const float c0 = exp2f(m0 - b0), c1 = exp2f(m1 - b1);
    m0 = mn0, m1 = mn1;
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int nt = 0; nt < kTcKeys / 8; ++nt) {
      s[nt][0] = exp2f(s[nt][0] - b0);
      s[nt][1] = exp2f(s[nt][1] - b0);
      s[nt][2] = exp2f(s[nt][2] - b1);
      s[nt][3] = exp2f(s[nt][3] - b1);
      sum0 += s[nt][0] + s[nt][1];
      sum1 += s[nt][2] + s[nt][3];
    }
    l0 = l0 * c0 + sum0;  // per-thread partial sums; the quad is reduced at the end
    l1 = l1 * c1 + sum1;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      o[dt][0] *= c0;
      o[dt][1] *= c0;
      o[dt][2] *= c1;
      o[dt][3] *= c1;
    }
#pragma unroll
    for (int kk = 0; kk < kTcKeys / 16; ++kk) {
      const uint32_t a[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                             pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      const bf16* vr = &Vt[g * VP + kk * 16 + 2 * t4];
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        const uint32_t v0 = *reinterpret_cast<const uint32_t*>(vr + dt * 8 * VP);
        const uint32_t v1 = *reinterpret_cast<const uint32_t*>(vr + dt * 8 * VP + 8);
        mma_bf16(o[dt], a, v0, v1);
      }
    }
  }
#pragma unroll
  for (int off = 1; off <= 2; off <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, off);
    l1 += __shfl_xor_sync(0xffffffffu, l1, off);
  }
  const float inv0 = 1.0f / l0, inv1 = 1.0f / l1;
  float* o0 = out + (static_cast<int64_t>(t0) * hq + h) * D + 2 * t4;
  float* o1 = out + (static_cast<int64_t>(t1) * hq + h) * D + 2 * t4;
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) {
    if (r0 < tile.y) *reinterpret_cast<float2*>(o0 + dt * 8) = make_float2(o[dt][0] * inv0, o[dt][1] * inv0);
    if (r1 < tile.y) *reinterpret_cast<float2*>(o1 + dt * 8) = make_float2(o[dt][2] * inv1, o[dt][3] * inv1);
  }
}

bool use_simt_prefill() {
  static const bool simt = [] { return word_knob("SPARKCTL_PREFILL_ATTN") == "simt"; }();
  return simt;
}

}  // namespace

bool prefill_attention_supports(int head_dim) { return head_dim == 64 || head_dim == 128; }

Status prefill_attention(const float* q, const bf16* k_cache, const bf16* v_cache, const int2* tiles,
                         int n_tiles, const int32_t* table_offset, const int32_t* positions,
                         const int32_t* block_tables, int n_q_heads, int n_kv_heads, int head_dim,
                         int block_size, int window, float scale, float* out, cudaStream_t s) {
  if (n_tiles == 0) return ok_status();
  dim3 grid(n_tiles, n_q_heads);
  if (!use_simt_prefill() && (head_dim == 128 || head_dim == 64)) {
    if (head_dim == 128)
      prefill_attention_tc_kernel<128>
          <<<grid, kTcThreads, 0, s>>>(q, k_cache, v_cache, tiles, table_offset, positions, block_tables,
                                       n_q_heads, n_kv_heads, block_size, window, scale, out);
    else
      prefill_attention_tc_kernel<64><<<grid, kTcThreads, 0, s>>>(q, k_cache, v_cache, tiles, table_offset,
                                                                  positions, block_tables, n_q_heads,
                                                                  n_kv_heads, block_size, window, scale, out);
    SPK_CUDA_LAUNCH_CHECK();
    return ok_status();
  }
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
