// A causal LM assembled from layer types, run by a kernels backend. Same model code for every backend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/base/status.h"
#include "runtime/model/model_config.h"
#include "runtime/model/step.h"

namespace spk::rt {

namespace dist {
class Communicator;
}

struct LoadOptions {
  std::string backend = "cpu";  // "cpu" (fp32 reference) | "cuda" (when built)
  int tp_rank = 0;              // tensor parallelism: this rank's slice (runtime/model/tp_shard.h)
  int tp_world = 1;
  int threads = 0;  // CPU backend worker threads, 0 = hardware concurrency
  // The group's communicator (rank/world must equal tp_rank/tp_world; outlives the model). Required when
  // tp_world > 1; world 1 uses the single communicator.
  dist::Communicator* comm = nullptr;
  // Refuse a checkpoint holding NaN/Inf weights (else a warning names the count and the first tensor).
  bool refuse_nonfinite = false;
};

class WeightSource;

// The largest step the scheduler will run: max_num_batched_tokens new tokens, max_num_seqs sequences (and
// sampled rows), each up to max_model_len tokens of context in blocks of block_size.
struct StepLimits {
  int max_tokens = 0;
  int max_seqs = 0;
  int max_model_len = 0;
  int block_size = 16;
};

class Model {
 public:
  // config.json + safetensors of a HF checkpoint directory. Unknown architectures are refused by name.
  static Result<std::unique_ptr<Model>> load(const std::string& model_dir, const LoadOptions& opts);
  // Same, from a parsed config and any weight source (tests, tools).
  static Result<std::unique_ptr<Model>> load(const ModelConfig& config, std::shared_ptr<WeightSource> weights,
                                             const LoadOptions& opts);
  virtual ~Model() = default;

  [[nodiscard]] virtual const ModelConfig& config() const = 0;
  [[nodiscard]] virtual uint64_t weight_bytes() const = 0;  // resident weight bytes on the device
  // Weight bytes one decode step of `batch` tokens reads: the untied embedding table only by row, and of
  // the routed experts the expected share a uniform router touches, 1 - (1 - k/E)^batch (exact at batch 1).
  [[nodiscard]] virtual uint64_t decode_bytes(int batch) const { return weight_bytes() + 0 * batch; }
  [[nodiscard]] virtual uint64_t kv_bytes_per_token() const = 0;  // all layers, K and V
  // Activation bytes of the largest step within `limits` (memory planner input): the model's buffers as
  // reserve_steps allocates them (per token up to max_tokens; logits only for the sampled rows, at most
  // max_seqs) plus the backend's scratch (Backend::scratch_bytes).
  [[nodiscard]] virtual uint64_t activation_bytes(const StepLimits& limits) const = 0;
  // Allocates all of that now, before allocate_kv: a step within `limits` then allocates nothing.
  virtual Status reserve_steps(const StepLimits& limits) {
    (void)limits;
    return ok_status();
  }
  // After the KV pool: any later allocation is refused naming the buffer and the knob (Backend::seal_memory).
  virtual void seal_memory() {}
  [[nodiscard]] virtual MemoryCounters memory_counters() const { return {}; }

  // (Re)allocates the paged KV pool: num_blocks blocks of block_size tokens, every layer.
  virtual Status allocate_kv(int num_blocks, int block_size) = 0;
  [[nodiscard]] virtual int block_size() const = 0;
  [[nodiscard]] virtual int num_blocks() const = 0;

  // One step. `logits` is resized to batch.logit_rows.size() x vocab_size (fp32, row-major). Tensor
  // parallel: every rank runs the same batch (collectives inside) and gets the full logits.
  virtual Status forward(const StepBatch& batch, std::vector<float>& logits) = 0;

  // One step that samples on the backend (Backend::sample): rows[i] says how to sample logit row i,
  // tokens[i] is the result. Where tokens[i].host is set the backend left the row to the caller, and
  // logits[i * vocab_size ...] holds that row's logits (other rows of `logits` are unspecified).
  // Default: forward(), every row host.
  virtual Status forward_sample(const StepBatch& batch, const std::vector<SampleRow>& rows,
                                std::vector<SampledToken>& tokens, std::vector<float>& logits);
};

}  // namespace spk::rt
