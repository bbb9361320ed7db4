// Small memory-bound ops of the step: embedding gather, RMSNorm (+ fused residual add), SiLU*mul,
// residual add, RoPE + paged KV write, argmax. Each is one pass over its tensors.
#include <cfloat>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

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

__global__ void embedding_kernel(const bf16* table, const int32_t* ids, int hidden, float* out) {
  const int t = blockIdx.x;
  const bf16* row = table + static_cast<int64_t>(ids[t]) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) out[static_cast<int64_t>(t) * hidden + i] = __bfloat162float(row[i]);
}

__global__ void rmsnorm_kernel(const float* x, float* residual, const bf16* w, int dim, float eps, float* out) {
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
  for (int i = threadIdx.x; i < dim; i += blockDim.x) out[base + i] = src[base + i] * inv * __bfloat162float(w[i]);
}

__global__ void silu_mul_kernel(const float* gu, int inter, float* out) {
  const int64_t t = blockIdx.y;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < inter; i += gridDim.x * blockDim.x) {
    const float g = gu[t * 2 * inter + i];
    const float u = gu[t * 2 * inter + inter + i];
    out[t * inter + i] = g / (1.0f + expf(-g)) * u;
  }
}

__global__ void add_kernel(float* x, const float* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] += y[i];
}

__global__ void rope_cache_kernel(float* q, float* k, const float* v, const int32_t* positions,
                                  const float* inv_freq, const int32_t* slots, int hq, int hk, int d,
                                  bf16* k_cache, bf16* v_cache) {
  const int t = blockIdx.x;
  const int half = d / 2;
  const float pos = static_cast<float>(positions[t]);
  // q heads then k heads: (hq + hk) * half rotations
  for (int j = threadIdx.x; j < (hq + hk) * half; j += blockDim.x) {
    const int h = j / half, i = j % half;
    float* x = h < hq ? q + (static_cast<int64_t>(t) * hq + h) * d : k + (static_cast<int64_t>(t) * hk + (h - hq)) * d;
    const float ang = pos * inv_freq[i];
    float sn, cs;
    sincosf(ang, &sn, &cs);
    const float x1 = x[i], x2 = x[i + half];
    x[i] = x1 * cs - x2 * sn;
    x[i + half] = x2 * cs + x1 * sn;
  }
  __syncthreads();
  const int64_t slot = slots[t];
  for (int j = threadIdx.x; j < hk * d; j += blockDim.x) {
    k_cache[slot * hk * d + j] = __float2bfloat16(k[static_cast<int64_t>(t) * hk * d + j]);
    v_cache[slot * hk * d + j] = __float2bfloat16(v[static_cast<int64_t>(t) * hk * d + j]);
  }
}

__global__ void argmax_kernel(const float* logits, int vocab, int32_t* ids) {
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
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, best, o);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
    if (ov > best || (ov == best && oi < idx)) {
      best = ov;
      idx = oi;
    }
  }
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
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, idx, o);
      if (ov > best || (ov == best && oi < idx)) {
        best = ov;
        idx = oi;
      }
    }
    if (lane == 0) ids[blockIdx.x] = idx;
  }
}

int threads_for(int n) { return n >= 1024 ? 1024 : (n <= 32 ? 32 : ((n + 31) / 32) * 32); }

}  // namespace

Status embedding(const bf16* table, const int32_t* ids, int n_tokens, int hidden, float* out, cudaStream_t s) {
  if (n_tokens == 0) return ok_status();
  embedding_kernel<<<n_tokens, threads_for(hidden), 0, s>>>(table, ids, hidden, out);
  SPK_CUDA_LAUNCH_CHECK();
  return ok_status();
}

Status rmsnorm(const float* x, float* residual, const bf16* w, int rows, int dim, float eps, float* out,
               cudaStream_t s) {
  if (rows == 0) return ok_status();
  rmsnorm_kernel<<<rows, threads_for(dim), 0, s>>>(x, residual, w, dim, eps, out);
  SPK_CUDA_LAUNCH_CHECK();
  return ok_status();
}

Status silu_mul(const float* gate_up, int n_tokens, int inter, float* out, cudaStream_t s) {
  if (n_tokens == 0) return ok_status();
  dim3 grid((inter + 255) / 256, n_tokens);
  silu_mul_kernel<<<grid, 256, 0, s>>>(gate_up, inter, out);
  SPK_CUDA_LAUNCH_CHECK();
  return ok_status();
}

Status add_inplace(float* x, const float* y, int64_t n, cudaStream_t s) {
  if (n == 0) return ok_status();
  const int blocks = static_cast<int>(std::min<int64_t>((n + 255) / 256, 4096));
  add_kernel<<<blocks, 256, 0, s>>>(x, y, n);
  SPK_CUDA_LAUNCH_CHECK();
  return ok_status();
}

Status rope_and_cache(float* q, float* k, const float* v, const int32_t* positions, const float* inv_freq,
                      const int32_t* slot_mapping, int n_tokens, int n_q_heads, int n_kv_heads, int head_dim,
                      bf16* k_cache, bf16* v_cache, cudaStream_t s) {
  if (n_tokens == 0) return ok_status();
  rope_cache_kernel<<<n_tokens, 256, 0, s>>>(q, k, v, positions, inv_freq, slot_mapping, n_q_heads, n_kv_heads,
                                             head_dim, k_cache, v_cache);
  SPK_CUDA_LAUNCH_CHECK();
  return ok_status();
}

Status argmax(const float* logits, int batch, int vocab, int32_t* ids, cudaStream_t s) {
  if (batch == 0) return ok_status();
  argmax_kernel<<<batch, 1024, 0, s>>>(logits, vocab, ids);
  SPK_CUDA_LAUNCH_CHECK();
  return ok_status();
}

}  // namespace spk::cuda
