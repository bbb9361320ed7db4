// Small memory-bound ops of the step: embedding gather, row gather, RMSNorm (+ fused residual add),
// SiLU*mul, residual add, RoPE and the paged KV write (apart or fused), argmax. Each is one pass over its
// tensors.
#include <algorithm>
#include <cfloat>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.h"

namespace spk::cuda {
namespace {

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024). Result valid in every thread.
__device__ float block_sum(float v) {
  __shared__ float part[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // `part` may still be read by a previous call
  if (lane == 0) part[warp] = v;
  __syncthreads();
  const int nw = blockDim.x >> 5;
  v = lane < nw ? part[lane] : 0.0f;
  return warp_sum(v);
}

template <class T>
__device__ __forceinline__ float to_f32(T v);
template <>
__device__ __forceinline__ float to_f32<bf16>(bf16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float to_f32<float>(float v) {
  return v;
}

template <class T>
__global__ void embedding_kernel(const T* table, const int32_t* ids, int hidden, int vocab, float* out) {
  pdl_begin();
  const int t = blockIdx.x;
  const int id = ids[t];
  const bool valid = id >= 0 && id < vocab;
  const T* row = table + static_cast<int64_t>(valid ? id : 0) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x)
    out[static_cast<int64_t>(t) * hidden + i] = valid ? to_f32(row[i]) : 0.0f;
}

__global__ void gather_rows_kernel(const float* x, const int32_t* rows, int width, float* out) {
  pdl_begin();
  const int64_t r = rows[blockIdx.x];
  for (int i = threadIdx.x; i < width; i += blockDim.x)
    out[static_cast<int64_t>(blockIdx.x) * width + i] = x[r * width + i];
}

__global__ void rmsnorm_kernel(const float* x, float* residual, const float* w, int dim, float eps,
                               float* out) {
  pdl_begin();
  const int64_t base = static_cast<int64_t>(blockIdx.x) * dim;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = x[base + i];
    if (residual) {
      v += residual[base + i];
      residual[base + i] = v;
    }
    ss += v * v;
  }
  ss = block_sum(ss);
  const float inv = rsqrtf(ss / static_cast<float>(dim) + eps);
  const float* src = residual ? residual : x;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) out[base + i] = src[base + i] * inv * w[i];
}

__global__ void silu_mul_kernel(const float* gate, const float* up, int64_t n, float* out) {
  pdl_begin();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.0f + expf(-g)) * up[i];
  }
}

__global__ void add_kernel(float* x, const float* y, int64_t n) {
  pdl_begin();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] += y[i];
}

__device__ void rope_token(float* q, float* k, float pos, const float* inv_freq, int t, int hq, int hk,
                           int d) {
  const int half = d / 2;
  for (int j = threadIdx.x; j < (hq + hk) * half; j += blockDim.x) {  // q heads then k heads
    const int h = j / half, i = j % half;
    float* x = h < hq ? q + (static_cast<int64_t>(t) * hq + h) * d
                      : k + (static_cast<int64_t>(t) * hk + (h - hq)) * d;
    const float ang = pos * inv_freq[i];  // fp32 angle, as HF computes it
    float sn, cs;
    sincosf(ang, &sn, &cs);
    const float x1 = x[i], x2 = x[i + half];
    x[i] = x1 * cs - x2 * sn;
    x[i + half] = x2 * cs + x1 * sn;
  }
}

__device__ void cache_token(const float* k, const float* v, int64_t slot, int t, int hk, int d, bf16* k_cache,
                            bf16* v_cache) {
  for (int j = threadIdx.x; j < hk * d; j += blockDim.x) {
    k_cache[slot * hk * d + j] = __float2bfloat16(k[static_cast<int64_t>(t) * hk * d + j]);
    v_cache[slot * hk * d + j] = __float2bfloat16(v[static_cast<int64_t>(t) * hk * d + j]);
  }
}

__global__ void rope_kernel(float* q, float* k, const int32_t* positions, const float* inv_freq, int hq,
                            int hk, int d) {
  pdl_begin();
  rope_token(q, k, static_cast<float>(positions[blockIdx.x]), inv_freq, blockIdx.x, hq, hk, d);
}

__global__ void kv_write_kernel(const float* k, const float* v, const int32_t* slots, int hk, int d,
                                bf16* k_cache, bf16* v_cache) {
  pdl_begin();
  cache_token(k, v, slots[blockIdx.x], blockIdx.x, hk, d, k_cache, v_cache);
}

__global__ void rope_cache_kernel(float* q, float* k, const float* v, const int32_t* positions,
                                  const float* inv_freq, const int32_t* slots, int hq, int hk, int d,
                                  bf16* k_cache, bf16* v_cache) {
  pdl_begin();
  rope_token(q, k, static_cast<float>(positions[blockIdx.x]), inv_freq, blockIdx.x, hq, hk, d);
  __syncthreads();  // the cache write reads k rotated by other threads of this block
  cache_token(k, v, slots[blockIdx.x], blockIdx.x, hk, d, k_cache, v_cache);
}

// (best, idx) of the whole warp in every lane; ties go to the lower index.
__device__ __forceinline__ void warp_argmax(float& best, int& idx) {
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ov > best || (ov == best && oi < idx)) {
      best = ov;
      idx = oi;
    }
  }
}

__global__ void argmax_kernel(const float* logits, int vocab, int32_t* ids) {
  pdl_begin();
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  float best = -FLT_MAX;
  int idx = 0x7fffffff;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = row[i];
    if (v > best) {  // strided scan visits increasing i: first max per thread is the lowest id
      best = v;
      idx = i;
    }
  }
  warp_argmax(best, idx);
  __shared__ float sv[32];
  __shared__ int si[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sv[warp] = best;
    si[warp] = idx;
  }
  __syncthreads();
  if (warp == 0) {
    const int nw = blockDim.x >> 5;
    best = lane < nw ? sv[lane] : -FLT_MAX;
    idx = lane < nw ? si[lane] : 0x7fffffff;
    warp_argmax(best, idx);
    if (lane == 0) ids[blockIdx.x] = idx;
  }
}

int threads_for(int n) { return n >= 1024 ? 1024 : (n <= 32 ? 32 : ((n + 31) / 32) * 32); }

}  // namespace

Status embedding(const void* table, bool table_is_bf16, const int32_t* ids, int n_tokens, int hidden,
                 int vocab, float* out, cudaStream_t s) {
  if (n_tokens == 0) return ok_status();
  if (table_is_bf16)
    SPK_LAUNCH(embedding_kernel<bf16>, n_tokens, threads_for(hidden), 0, s, static_cast<const bf16*>(table),
               ids, hidden, vocab, out);
  else
    SPK_LAUNCH(embedding_kernel<float>, n_tokens, threads_for(hidden), 0, s, static_cast<const float*>(table),
               ids, hidden, vocab, out);
  return ok_status();
}

Status gather_rows(const float* x, const int32_t* rows, int m, int width, float* out, cudaStream_t s) {
  if (m == 0) return ok_status();
  SPK_LAUNCH(gather_rows_kernel, m, threads_for(width), 0, s, x, rows, width, out);
  return ok_status();
}

Status rmsnorm(const float* x, float* residual, const float* w, int rows, int dim, float eps, float* out,
               cudaStream_t s) {
  if (rows == 0) return ok_status();
  SPK_LAUNCH(rmsnorm_kernel, rows, threads_for(dim), 0, s, x, residual, w, dim, eps, out);
  return ok_status();
}

Status silu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t s) {
  if (n == 0) return ok_status();
  const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 4096));
  SPK_LAUNCH(silu_mul_kernel, blocks, 256, 0, s, gate, up, n, out);
  return ok_status();
}

__global__ void copy_bytes_kernel(const unsigned char* __restrict__ src, unsigned char* __restrict__ dst,
                                  int64_t n) {
  pdl_begin();
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

Status copy_device(const void* src, void* dst, int64_t bytes, cudaStream_t s) {
  if (bytes == 0) return ok_status();
  const int blocks = static_cast<int>(std::min<int64_t>((bytes + 255) / 256, 256));
  SPK_LAUNCH(copy_bytes_kernel, blocks, 256, 0, s, static_cast<const unsigned char*>(src),
             static_cast<unsigned char*>(dst), bytes);
  return ok_status();
}

Status add_inplace(float* x, const float* y, int64_t n, cudaStream_t s) {
  if (n == 0) return ok_status();
  const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 4096));
  SPK_LAUNCH(add_kernel, blocks, 256, 0, s, x, y, n);
  return ok_status();
}

Status rope(float* q, float* k, const int32_t* positions, const float* inv_freq, int n_tokens, int n_q_heads,
            int n_kv_heads, int head_dim, cudaStream_t s) {
  if (n_tokens == 0) return ok_status();
  SPK_LAUNCH(rope_kernel, n_tokens, 256, 0, s, q, k, positions, inv_freq, n_q_heads, n_kv_heads, head_dim);
  return ok_status();
}

Status kv_write(const float* k, const float* v, const int32_t* slot_mapping, int n_tokens, int n_kv_heads,
                int head_dim, bf16* k_cache, bf16* v_cache, cudaStream_t s) {
  if (n_tokens == 0) return ok_status();
  SPK_LAUNCH(kv_write_kernel, n_tokens, 256, 0, s, k, v, slot_mapping, n_kv_heads, head_dim, k_cache,
             v_cache);
  return ok_status();
}

Status rope_and_cache(float* q, float* k, const float* v, const int32_t* positions, const float* inv_freq,
                      const int32_t* slot_mapping, int n_tokens, int n_q_heads, int n_kv_heads, int head_dim,
                      bf16* k_cache, bf16* v_cache, cudaStream_t s) {
  if (n_tokens == 0) return ok_status();
  SPK_LAUNCH(rope_cache_kernel, n_tokens, 256, 0, s, q, k, v, positions, inv_freq, slot_mapping, n_q_heads,
             n_kv_heads, head_dim, k_cache, v_cache);
  return ok_status();
}

Status argmax(const float* logits, int batch, int vocab, int32_t* ids, cudaStream_t s) {
  if (batch == 0) return ok_status();
  SPK_LAUNCH(argmax_kernel, batch, 1024, 0, s, logits, vocab, ids);
  return ok_status();
}

}  // namespace spk::cuda
