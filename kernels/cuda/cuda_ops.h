// CUDA ops of the decode/prefill step, on raw device pointers. Conventions:
//  - weights are bf16 (as in the checkpoint), row-major [out, in]; activations fp32 (the residual
//    stream stays fp32 so the CUDA step tracks the fp32 CPU reference closely); KV cache bf16.
//  - every op takes a stream and enqueues only (no sync, no allocation): decode steps are captured as
//    CUDA graphs, so everything a step reads per call (ids, positions, slots, context lengths, block
//    tables) lives in device buffers whose addresses never change.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/base/status.h"

namespace spk::cuda {

using bf16 = __nv_bfloat16;

// out[t, :] = table[ids[t], :]   (table bf16 or f32 [vocab, hidden]; ids outside [0, vocab) give zeros)
Status embedding(const void* table, bool table_is_bf16, const int32_t* ids, int n_tokens, int hidden,
                 int vocab, float* out, cudaStream_t s);

// If residual != null: residual += x (in place), then out = rmsnorm(residual) * w.
// Else out = rmsnorm(x) * w. Rows of `dim`; w f32 [dim]. out may alias x.
Status rmsnorm(const float* x, float* residual, const float* w, int rows, int dim, float eps, float* out,
               cudaStream_t s);

// y[b, n] = sum_k x[b, k] * W[n, k] (+ bias[n]) for b < batch <= 8. Memory-bound GEMV: W is streamed
// once with 16-byte loads; x (fp32) is re-read from L1/L2. K must be a multiple of 8.
Status gemv_bf16(const bf16* W, const float* bias, const float* x, int batch, int N, int K, float* y,
                 cudaStream_t s);
inline constexpr int kGemvMaxBatch = 8;
// Several weights that read the same x (q/k/v, gate/up) in one launch: y_i = x . W_i^T (+ bias_i).
inline constexpr int kGemvMaxGroup = 3;
struct GemvSegment {
  const bf16* W;
  const float* bias;
  float* y;
  int N;
};
Status gemv_bf16_group(const GemvSegment* segs, int n, const float* x, int batch, int K, cudaStream_t s);
// Small ops folded into a GEMV (gemv.cu has the details). All null: a plain GEMV.
struct GemvFusion {
  // x is un-normalised: the GEMV reads rmsnorm(x) * norm_w (eps norm_eps), and writes that to norm_out
  // [batch, K] as rmsnorm would.
  const float* norm_w = nullptr;
  float norm_eps = 0.0f;
  float* norm_out = nullptr;
  float* accum = nullptr;       // one weight: accum[b, n] += y[b, n] (y is written too)
  float* swiglu_out = nullptr;  // two weights of equal N (gate, up): swiglu_out = silu(y_0) * y_1
  // One weight (the lm_head): the greedy argmax of each batch row b as well, atomicMax'ed by every block
  // into argmax[b * kArgmaxSlots + block % kArgmaxSlots] (argmax_key.cuh; slots zero before, consumed and
  // zeroed again by sample_rows).
  unsigned long long* argmax = nullptr;
};
inline constexpr int kArgmaxSlots = 32;
Status gemv_bf16_fused(const GemvSegment* segs, int n, const float* x, int batch, int K, const GemvFusion& f,
                       cudaStream_t s);

// out[i] = silu(gate[i]) * up[i], n elements
Status silu_mul(const float* gate, const float* up, int64_t n, float* out, cudaStream_t s);

// out[i, :] = x[rows[i], :] for i < m; row width `width` floats.
Status gather_rows(const float* x, const int32_t* rows, int m, int width, float* out, cudaStream_t s);

// dst[0, bytes) = src[0, bytes), both device memory, as a kernel (a graph kernel node holds only the
// raw addresses; a memcpy node may keep per-allocation state that a free + reallocation at the same
// address leaves stale).
Status copy_device(const void* src, void* dst, int64_t bytes, cudaStream_t s);

// x += y (n elements)
Status add_inplace(float* x, const float* y, int64_t n, cudaStream_t s);

// RoPE (rotate_half / neox layout, as HF Llama/Qwen) in place on q [T, Hq, D] and k [T, Hk, D] at
// positions[t], inv_freq [D/2] precomputed on the host (llama3 scaling folded in).
Status rope(float* q, float* k, const int32_t* positions, const float* inv_freq, int n_tokens, int n_q_heads,
            int n_kv_heads, int head_dim, cudaStream_t s);

// Writes k and v [T, Hk, D] into the paged caches (bf16 [num_blocks, block_size, Hk, D]) at
// slot_mapping[t] = block * block_size + offset.
Status kv_write(const float* k, const float* v, const int32_t* slot_mapping, int n_tokens, int n_kv_heads,
                int head_dim, bf16* k_cache, bf16* v_cache, cudaStream_t s);

// Both of the above in one pass (q/k rotated in place, then k/v cached).
Status rope_and_cache(float* q, float* k, const float* v, const int32_t* positions, const float* inv_freq,
                      const int32_t* slot_mapping, int n_tokens, int n_q_heads, int n_kv_heads, int head_dim,
                      bf16* k_cache, bf16* v_cache, cudaStream_t s);

// Paged attention over a flattened varlen batch. Token t at position pos[t] attends causally to
// positions [max(0, pos - window + 1) .. pos] of its sequence, whose KV sits in blocks
// block_tables[table_offset[t] + j / block_size]. q [T, Hq, D] fp32 -> out [T, Hq, D] fp32.
// GQA: q head h reads kv head h / (Hq / Hk). window <= 0 means full attention.
Status paged_attention(const float* q, const bf16* k_cache, const bf16* v_cache, const int32_t* table_offset,
                       const int32_t* positions, const int32_t* block_tables, int n_tokens, int n_q_heads,
                       int n_kv_heads, int head_dim, int block_size, int window, float scale, float* out,
                       cudaStream_t s, int n_splits = 1, float* partial = nullptr, bool share_kv = true,
                       int* split_counters = nullptr);
// Split-KV: with n_splits > 1 each (token, head) is spread over n_splits blocks, each taking a contiguous
// share of the visible keys, and a second kernel merges their softmax partials. `partial` holds
// n_tokens * n_q_heads * n_splits * (head_dim + 2) floats. Long contexts at small batch need this: one
// block per head leaves most of the 132 SMs idle.
// share_kv: when paged_attention_shares_kv(), one block per (token, kv head, split) reads each K/V row
// once for its whole GQA group (else one block per (token, q head, split), the per-head kernel).
// split_counters (n_tokens * n_kv_heads ints, zero before the first call; every call leaves them zero):
// with the shared kernel, the last split block of each (token, kv head) merges the partials itself and
// no combine kernel is launched.
bool paged_attention_shares_kv(int n_q_heads, int n_kv_heads, int head_dim);

// Decode steps (one new token per sequence, at positions[t], its slot slot_mapping[t]): rope_and_cache()
// folded into the shared-KV attention, one kernel instead of two. q [T, Hq, D] and k [T, Hk, D] come
// unrotated and are left rotated, the new k/v rows land in the caches as kv_write() writes them, and `out`
// is paged_attention()'s. Needs paged_attention_shares_kv(); n_splits > 1 needs `partial` and the split
// counters (the block that merges the splits writes q back).
struct DecodeRope {
  float* q = nullptr;
  float* k = nullptr;
  const float* v = nullptr;
  const float* inv_freq = nullptr;
  const int32_t* slots = nullptr;
  bf16* k_cache = nullptr;
  bf16* v_cache = nullptr;
};
Status paged_attention_rope(const DecodeRope& rope, const int32_t* table_offset, const int32_t* positions,
                            const int32_t* block_tables, int n_tokens, int n_q_heads, int n_kv_heads,
                            int head_dim, int block_size, int window, float scale, float* out, cudaStream_t s,
                            int n_splits, float* partial, int* split_counters);

// Tiled causal attention for prefill chunks (same semantics as paged_attention). tiles[i] = (first token
// row, count <= 64) of consecutive tokens of one sequence; every token lies in exactly one tile.
// head_dim 64 or 128 (prefill_attention_supports).
inline constexpr int kPrefillTileQ = 64;
bool prefill_attention_supports(int head_dim);
Status prefill_attention(const float* q, const bf16* k_cache, const bf16* v_cache, const int2* tiles,
                         int n_tiles, const int32_t* table_offset, const int32_t* positions,
                         const int32_t* block_tables, int n_q_heads, int n_kv_heads, int head_dim,
                         int block_size, int window, float scale, float* out, cudaStream_t s);

// ids[b] = argmax_v logits[b, v] (ties to the lowest id)
Status argmax(const float* logits, int batch, int vocab, int32_t* ids, cudaStream_t s);

// Device-side sampling of logits rows (sample.cu has the semantics: runtime/sampler's, without
// penalties). `u` is the draw in [0, 1) the host PRNG took for the row.
inline constexpr int kMaxSampleCandidates = 1024;
struct DeviceSampleRow {
  float temperature;
  int32_t top_k;
  float top_p;
  float min_p;
  double u;
  int32_t want_logprob;
  int32_t host;  // skip: the host samples this row
};
struct DeviceSampleOut {
  int32_t id;
  float logprob;
  int32_t host;  // 1: not decided on the device (the host must sample this row from its logits)
  int32_t pad;
};
// params and out may be device memory or pinned host memory (the CUDA backend passes the latter).
// argmax_slots (GemvFusion::argmax of the GEMV that wrote the logits, or null): greedy rows without logprobs
// take the id from there and skip the scan of the row; every row's slots are zeroed.
Status sample_rows(const float* logits, int rows, int vocab, const DeviceSampleRow* params,
                   DeviceSampleOut* out, cudaStream_t s, unsigned long long* argmax_slots = nullptr);

}  // namespace spk::cuda
