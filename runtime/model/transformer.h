// The decoder-only transformer behind Model (internal header): embedding -> N x DecoderLayer ->
// final norm -> lm_head (tied to the embedding when the config says so), over the paged KV pool.
// Tensor parallel: this rank's slice of every layer (tp.plan); the layers run the collectives, so
// every rank computes the same residual stream and the full logits.
#pragma once

#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "runtime/model/layers.h"
#include "runtime/model/model.h"
#include "runtime/model/vocab_parallel.h"

namespace spk::rt {

class Transformer final : public Model {
 public:
  // tp.comm must outlive the model; world 1 may pass no communicator.
  static Result<std::unique_ptr<Model>> create(const ModelConfig& cfg, std::shared_ptr<WeightSource> src,
                                               std::unique_ptr<Backend> be, TpContext tp);

  [[nodiscard]] const ModelConfig& config() const override { return cfg_; }
  [[nodiscard]] uint64_t weight_bytes() const override { return weight_bytes_; }
  [[nodiscard]] uint64_t decode_bytes(int batch) const override;
  [[nodiscard]] uint64_t kv_bytes_per_token() const override { return kv_spec().bytes_per_token(); }
  // This rank's cache: the backend's KV format, this rank's KV heads (block size as allocated).
  [[nodiscard]] KvSpec kv_spec() const;
  [[nodiscard]] uint64_t activation_bytes(const StepLimits& limits) const override;
  Status reserve_steps(const StepLimits& limits) override;
  // Only once reserve_steps has sized the buffers (a model never reserved keeps growing on demand).
  void seal_memory() override {
    if (reserved_) be_->seal_memory();
  }
  [[nodiscard]] MemoryCounters memory_counters() const override { return be_->memory_counters(); }
  Status allocate_kv(int num_blocks, int block_size) override;
  [[nodiscard]] int block_size() const override { return block_size_; }
  [[nodiscard]] int num_blocks() const override { return num_blocks_; }
  Status forward(const StepBatch& batch, std::vector<float>& logits) override;
  Status forward_sample(const StepBatch& batch, const std::vector<SampleRow>& rows,
                        std::vector<SampledToken>& tokens, std::vector<float>& logits) override;

 private:
  Transformer() = default;
  Status load(const WeightSource& src);
  Status reserve(int64_t n_tokens, int64_t n_logits);  // grows the activation buffers
  // What reserve(n_tokens, n_logits) allocates, in floats per token and per logit row.
  [[nodiscard]] uint64_t floats_per_token() const;
  [[nodiscard]] uint64_t floats_per_logit_row() const;
  [[nodiscard]] StepShapes step_shapes(const StepLimits& limits) const;
  Result<StepMeta> step_meta(const StepBatch& b) const;
  // The step up to the logits: *out = [logit_rows, vocab] on the backend (empty when no rows).
  Status run(const StepBatch& batch, Tensor* out);

  ModelConfig cfg_;
  std::shared_ptr<WeightSource> src_;
  std::unique_ptr<Backend> be_;
  TpContext tp_;
  std::unique_ptr<dist::Communicator> single_;  // world 1 without a caller's communicator
  VocabParallelEmbedding embed_;
  VocabParallelLmHead lm_head_;
  Tensor inv_freq_;
  RmsNorm final_norm_;
  std::vector<DecoderLayer> layers_;
  std::vector<KvCache> kv_;  // per layer
  int block_size_ = 0, num_blocks_ = 0;
  uint64_t weight_bytes_ = 0;
  // Activation storage sized for cap_tokens_ / cap_logits_ rows; each step takes [n] views.
  Activations cap_;
  Tensor ids_cap_, rows_cap_, last_cap_, logits_cap_, gathered_cap_, full_cap_;
  int64_t cap_tokens_ = 0, cap_logits_ = 0;
  bool reserved_ = false;  // reserve_steps ran
};

}  // namespace spk::rt
