// The backend seam: the model graph (runtime/model) calls these ops; a backend (CPU reference in
// kernels/cpu, CUDA later) runs them. The same model code drives every backend.
//
// Contracts every backend keeps:
// - Tensors are backend-owned handles: data pointer + dtype + shape + device. Row-major, contiguous.
//   `storage` keeps the bytes alive (an allocation of the backend, or the mmapped checkpoint the bytes
//   live in); copies and views share it.
// - Weights stay in their checkpoint dtype (f32/bf16/f16); activations are f32 on CPU. The CPU backend
//   converts weights in the inner loop and accumulates in fp32 (what HF does with bf16 upcast to f32).
// - Per-step metadata (positions, KV slots, sequences, block tables) is given once per step through
//   begin_step(); rope, kv_write and attention of every layer then use it. A device backend uploads it
//   once per step into fixed buffers (which is also what CUDA-graph replay needs).
// - Every op validates shapes and dtypes and names the op and the shapes when they do not fit.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/attention/attn_spec.h"
#include "kernels/base/status.h"
#include "kernels/dtype.h"
#include "kernels/formats/linear_weight.h"
#include "kernels/kv/kv_spec.h"
#include "kernels/moe_route.h"
#include "kernels/step_shapes.h"
#include "kernels/tensor.h"

namespace spk {

// One sequence of the current step (see runtime/model/step.h for the scheduling contract). Its new
// tokens are rows [q_start, q_start+q_len) of the step; after the step its cache holds ctx_len tokens;
// its blocks are StepMeta::block_tables[bt_offset, bt_offset + ceil(ctx_len / block_size)).
struct SeqMeta {
  int32_t q_start = 0;
  int32_t q_len = 0;
  int32_t ctx_len = 0;
  int32_t bt_offset = 0;
};

struct StepMeta {
  int32_t block_size = 0;
  std::vector<int32_t> positions;  // per new token: its position in its sequence
  std::vector<int32_t> slots;      // per new token: block_id * block_size + position % block_size
  std::vector<SeqMeta> seqs;
  std::vector<int32_t> block_tables;  // all sequences' tables, flattened
};

// Checks a step's metadata against the contract above (slots per position, every new token in exactly
// one sequence, positions inside ctx_len, block tables long enough) and returns, per new token, the
// index of its sequence in meta.seqs. Errors name the sequence or token row and the bad value. Every
// backend's begin_step calls it.
Result<std::vector<int32_t>> check_step_meta(const StepMeta& meta);

// A device backend decides a row itself when its top-k / top-p / min-p survivors lie among the row's
// kMaxDeviceSampleCandidates most likely tokens (else it hands the row back: SampledToken::host).
inline constexpr int kMaxDeviceSampleCandidates = 1024;

// One row of Backend::sample: runtime/sampler's parameters without penalties (those need the history
// and stay on the host: set `host`).
struct SampleRow {
  float temperature = 0.0f;  // 0 = greedy (argmax, ties to the lowest id)
  int top_k = 0;             // <= 0 = off
  float top_p = 1.0f;
  float min_p = 0.0f;
  double u = 0.0;  // the row's draw in [0, 1), taken by the caller's PRNG (unused when greedy)
  bool want_logprob = false;
  bool host = false;  // the caller samples this row itself from its logits
};

struct SampledToken {
  int32_t id = -1;
  float logprob = 0.0f;  // log-softmax of the logits at temperature 1, when asked for
  bool host = true;      // not decided here: the caller samples this row from its logits
};

// One SiLU-GLU expert of a mixture-of-experts layer (see Backend::moe_ffn): gate, up [inter, d] and
// down [d, inter] as linear weights in any format the backend's experts take (supports_experts); `inter`
// may differ between experts (shared experts are wider).
struct ExpertWeights {
  LinearWeight gate, up, down;
  [[nodiscard]] int64_t inter() const { return gate.out; }
  [[nodiscard]] uint64_t bytes() const { return gate.bytes() + up.bytes() + down.bytes(); }
};

class Backend {
 public:
  virtual ~Backend() = default;
  [[nodiscard]] virtual std::string_view name() const = 0;
  [[nodiscard]] virtual Device device() const = 0;

  // ---- variants (asked at load: a model the backend cannot run is refused before any bytes move) ----
  [[nodiscard]] virtual bool supports(WeightFormat f) const { return f == WeightFormat::dense; }
  // The formats moe_ffn takes for experts (a subset of supports(WeightFormat)).
  [[nodiscard]] virtual bool supports_experts(WeightFormat f) const { return f == WeightFormat::dense; }
  // Whether moe_ffn takes this layer's experts (width d) as loaded: a layout its kernels do not read (an
  // act-order GPTQ expert on CUDA, say) is refused at load, naming the expert and the fix.
  virtual Status check_experts(const std::vector<ExpertWeights>& experts, int64_t d) const {
    (void)experts, (void)d;
    return ok_status();
  }
  [[nodiscard]] virtual bool supports(KvFormat f) const { return f == kv_format(); }
  [[nodiscard]] virtual bool supports(AttnKind k) const {
    return k == AttnKind::causal || k == AttnKind::sliding;
  }
  // The KV format the caches take when the user asks for none (--kv-cache-dtype auto).
  [[nodiscard]] virtual KvFormat kv_format() const { return KvFormat::f32; }

  // ---- memory ----
  // Zero-filled tensor on the device.
  virtual Result<Tensor> alloc(DType dtype, std::vector<int64_t> shape) = 0;
  // A weight from host bytes of `src_dtype` that stay valid while `keepalive` lives (the mmapped
  // checkpoint). want == src_dtype: the backend may reference the bytes in place (CPU) or copy them to
  // the device; want == f32: converted copy. Other conversions are refused.
  virtual Result<Tensor> import_weight(const void* host, DType src_dtype, std::vector<int64_t> shape,
                                       std::shared_ptr<void> keepalive, DType want) = 0;
  // The dtype this backend keeps a matrix weight stored as `src` in (import_weight's `want` when no f32
  // copy is asked for). CPU: as stored. CUDA: bf16, so f16 and f32 checkpoints are converted at load.
  [[nodiscard]] virtual DType weight_dtype(DType src) const { return src; }
  virtual Status upload(const Tensor& dst, const void* host, size_t bytes) = 0;
  virtual Status download(const Tensor& src, void* host, size_t bytes) = 0;

  // ---- per step ----
  // Validates and keeps the metadata for rope / kv_write / attention until the next begin_step.
  virtual Status begin_step(const StepMeta& meta) = 0;

  // ---- ops (x: [n, ...] f32 activations unless said otherwise) ----
  // out[i, :] = table[ids[i], :]. table [vocab, d] any float dtype, ids [n] i32, out [n, d] f32.
  virtual Status embedding(const Tensor& table, const Tensor& ids, Tensor& out) = 0;
  // Row-wise RMSNorm over the last dim d = w.numel(): out = x / sqrt(mean(x^2) + eps) * w. x may be
  // [n, heads, d] (per-head q/k norm). out may alias x.
  virtual Status rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& out) = 0;
  // residual += delta; out = rmsnorm(residual) * w (the pre-norm transformer's add + norm, fused).
  virtual Status add_rmsnorm(Tensor& residual, const Tensor& delta, const Tensor& w, float eps,
                             Tensor& out) = 0;
  // y[n, out] = x[n, in] . W^T (+ bias[out]), W [out, in] in any format supports() accepts (dense: any
  // float dtype); bias f32 or null.
  virtual Status linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& y) = 0;
  // Neox-style RoPE (rotate_half, as HF Llama/Qwen) in place on q [n, hq, hd] and k [n, hk, hd] at the
  // step's positions; inv_freq [hd/2] f32 (already llama3-scaled when the model says so).
  virtual Status rope(Tensor& q, Tensor& k, const Tensor& inv_freq) = 0;
  // Writes k, v [n, hk, hd] into the layer's cache (K and V [num_blocks, block_size, hk, hd] of the
  // cache's format) at the step's slots.
  virtual Status kv_write(const Tensor& k, const Tensor& v, KvCache& cache) = 0;
  // Paged attention with GQA over the step's varlen batch: q [n, hq, hd] -> out [n, hq, hd]. Query at
  // position p sees cached keys j <= p (causal within the new tokens, full over earlier context),
  // restricted to p - j < sliding_window for AttnKind::sliding. hq must be a multiple of hk.
  virtual Status attention(const Tensor& q, const KvCache& cache, const AttnSpec& spec, Tensor& out) = 0;
  // ---- multi-head latent attention (AttnKind::mla; dims in spec.mla, kernels/attention/attn_spec.h) ----
  // RoPE in place on the rope part of q [n, hq, nope + rope] (its last `rope` values per head) and on
  // k_pe [n, rope], as transformers' DeepSeek-V3: with spec.mla.interleave the (x0, x1) pairs are first
  // de-interleaved (evens, then odds) and the result stays in that layout; cos and sin carry
  // spec.mla.rope_factor. inv_freq [rope / 2]. Default: refused (the backend has no MLA ops).
  virtual Status mla_rope(Tensor& q, Tensor& k_pe, const Tensor& inv_freq, const AttnSpec& spec) {
    (void)q, (void)k_pe, (void)inv_freq;
    return no_mla(spec);
  }
  // Writes [latent [n, kv_lora] | k_pe [n, rope]] into the layer's latent cache (cache.k
  // [num_blocks, block_size, 1, kv_lora + rope] of the cache's format) at the step's slots.
  virtual Status mla_kv_write(const Tensor& latent, const Tensor& k_pe, KvCache& cache,
                              const AttnSpec& spec) {
    (void)latent, (void)k_pe, (void)cache;
    return no_mla(spec);
  }
  // Causal attention over the latent cache: q [n, hq, nope + rope] (roped) -> out [n, hq, v]; kv_b
  // [hq * (nope + v), kv_lora] f32 (this rank's heads). Keys and values are the cached latents
  // up-projected through kv_b (or the absorbed equivalent, spec.mla.path); scores scaled by spec.scale.
  virtual Status mla_attention(const Tensor& q, const KvCache& cache, const Tensor& kv_b,
                               const AttnSpec& spec, Tensor& out) {
    (void)q, (void)cache, (void)kv_b, (void)out;
    return no_mla(spec);
  }

  // out = silu(gate) * up, all [n, d].
  virtual Status silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) = 0;
  // out[i, :] = x[rows[i], :]; rows [m] i32.
  virtual Status gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) = 0;
  // Mixture-of-experts FFN: out[t] = sum_j w[t, j] * down_e(silu(gate_e x[t]) * up_e x[t]) with
  // e = ids[t, j] (an index into `experts`; -1 = no expert). x, out [n, d] f32; ids [n, k] i32; w [n, k]
  // f32. For each token the experts are summed in ascending index order, so a row's result does not
  // depend on the other rows of the batch. Default: refused (the backend has no MoE op yet).
  virtual Status moe_ffn(const Tensor& x, const std::vector<ExpertWeights>& experts, const Tensor& ids,
                         const Tensor& w, Tensor& out) {
    (void)x, (void)experts, (void)ids, (void)w, (void)out;
    return make_error("backend '" + std::string(name()) + "' has no mixture-of-experts op",
                      "run mixture-of-experts models with --backend cpu");
  }

  // Mixture-of-experts routing (kernels/moe_route.h): logits [n, spec.logit_cols()] f32, bias
  // [spec.num_experts] f32 or null -> ids, w [n, spec.slots()] (i32, f32), ready for moe_ffn. Default:
  // through host memory with the fp32 reference (exact; on a GPU backend a round trip that also keeps the
  // step out of a CUDA graph, so the CUDA backend routes on the device).
  virtual Status moe_route(const Tensor& logits, const MoeRouteSpec& spec, const Tensor* bias, Tensor& ids,
                           Tensor& w);

  // Samples row i of logits [m, vocab] f32 with rows[i] (m == rows.size()) and returns only the ids
  // (and logprobs): the same choice runtime/sampler makes from these logits and this draw. Rows the
  // backend cannot decide exactly come back with host = true; the caller downloads those rows and
  // samples them itself. Default (CPU): every row host (the logits are already in host memory).
  virtual Status sample(const Tensor& logits, const std::vector<SampleRow>& rows,
                        std::vector<SampledToken>& out) {
    (void)logits;
    out.assign(rows.size(), SampledToken{});
    return ok_status();
  }

  // Waits for queued work (no-op on CPU).
  virtual Status synchronize() { return ok_status(); }

  // A hint between ops, no sync: what is queued so far may start on the device while the caller queues
  // the rest of the step. The CUDA backend launches a step in a few chunks this way, so the host's work
  // of building the step overlaps the GPU running its first part. No-op on CPU.
  virtual Status submit() { return ok_status(); }

  // Runs `fn` in op order with this backend's stream (nullptr on CPU, a cudaStream_t on CUDA): the hook
  // through which a communicator's collectives join the op stream (and a CUDA graph when captured).
  // CPU runs it at once. `fingerprint` names every pointer and size `fn` uses, as for the ops.
  // `capturable` false: `fn` synchronizes with the host (a host-staged collective), so it must run
  // eagerly after everything queued before it, never inside a captured graph.
  virtual Status enqueue_external(std::function<Status(void* stream)> fn, std::vector<uint64_t> fingerprint,
                                  bool capturable = true) {
    (void)fingerprint, (void)capturable;
    return fn(nullptr);
  }

  // ---- memory plan (kernels/step_shapes.h) ----
  // Bytes of the internal scratch (staging, split-KV partials, MoE plan, sampling rows, step metadata)
  // that steps within `shapes` need: what reserve_scratch(shapes) allocates. Host scratch of a CPU op
  // counts too (its "device" is RAM).
  [[nodiscard]] virtual uint64_t scratch_bytes(const StepShapes& shapes) const {
    (void)shapes;
    return 0;
  }
  // Allocates that scratch now, before the KV pool. Steps within `shapes` then never allocate.
  virtual Status reserve_scratch(const StepShapes& shapes) {
    (void)shapes;
    return ok_status();
  }
  // The expert list of one mixture-of-experts layer, known at load: a backend that keeps a table of it
  // (CUDA: the experts' device pointers) builds it now rather than at the first step.
  virtual Status prepare_experts(const std::vector<ExpertWeights>& experts) {
    (void)experts;
    return ok_status();
  }
  // From now on every allocation (alloc() and internal growth) is refused with an error naming the
  // buffer and the knob that sizes it: call it once the KV pool has taken the memory plan's budget.
  virtual void seal_memory() {}
  [[nodiscard]] virtual MemoryCounters memory_counters() const { return {}; }

 private:
  [[nodiscard]] Status no_mla(const AttnSpec& spec) const;
};

struct BackendOptions {
  std::string name = "cpu";  // "cpu" | "cuda" (when built)
  int threads = 0;           // CPU: worker threads, 0 = hardware concurrency
};

// Refusals for a variant `be` lacks, naming the variant, the backend and `what` (the tensor or layer).
Status require_support(const Backend& be, WeightFormat f, const std::string& what);
Status require_support(const Backend& be, KvFormat f, const std::string& what);
Status require_support(const Backend& be, AttnKind k, const std::string& what);

// Error names the backend and what is built when it is unknown or not built.
Result<std::unique_ptr<Backend>> make_backend(const BackendOptions& opts);

// HF inverse frequencies for RoPE: 1 / theta^(2i/rotary_dim), i < rotary_dim/2, with Llama 3 frequency
// scaling when `llama3` is set (factor, low/high freq factors, original context length).
struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
};
std::vector<float> rope_inv_freq(int rotary_dim, double theta, const Llama3RopeScaling* llama3);

}  // namespace spk
