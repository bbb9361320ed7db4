// Model::load: config + weights + backend -> the transformer for the config's architecture.
#include "runtime/model/model.h"

#include "kernels/backend.h"
#include "runtime/model/transformer.h"
#include "runtime/model/weight_source.h"

namespace spk::rt {

Result<std::unique_ptr<Model>> Model::load(const ModelConfig& config, std::shared_ptr<WeightSource> weights,
                                           const LoadOptions& opts) {
  // Every architecture parse_model_config accepts is a dense pre-norm decoder that the Transformer runs;
  // the per-architecture differences (biases, q/k norm, sliding window, rope scaling) are config facts.
  switch (config.arch) {
    case Arch::llama:
    case Arch::mistral:
    case Arch::qwen2:
    case Arch::qwen3:
    case Arch::qwen2_moe:
    case Arch::qwen3_moe:
    case Arch::mixtral:
    case Arch::deepseek_v3:
      break;
    default:
      return make_error("architecture '" + config.architecture + "' has no model graph",
                        "use a Llama, Mistral, Qwen2 or Qwen3 checkpoint");
  }
  SPK_ASSIGN(TpShardPlan plan, plan_tp_shard(config, opts.tp_rank, opts.tp_world));
  if (config.text_config_wrapper) weights = language_model_weights(std::move(weights));
  if (opts.tp_world > 1 && opts.comm == nullptr)
    return make_error(
        "tensor-parallel world " + std::to_string(opts.tp_world) + " needs the group's communicator",
        "join the process group (runtime/dist) before loading");
  SPK_ASSIGN(std::unique_ptr<Backend> be, make_backend({.name = opts.backend, .threads = opts.threads}));
  // Refused before any weight moves: a backend without the MLA ops cannot run any layer of the model.
  if (config.mla)
    SPK_TRY(
        require_support(*be, AttnKind::mla, config.architecture + " attention (model.layers.*.self_attn)"));
  return Transformer::create(config, std::move(weights), std::move(be), TpContext{plan, opts.comm});
}

Status Model::forward_sample(const StepBatch& batch, const std::vector<SampleRow>& rows,
                             std::vector<SampledToken>& tokens, std::vector<float>& logits) {
  if (rows.size() != batch.logit_rows.size())
    return make_error(std::to_string(rows.size()) + " sampling rows for " +
                          std::to_string(batch.logit_rows.size()) + " logit rows",
                      "give one SampleRow per logit row");
  tokens.assign(rows.size(), SampledToken{});
  return forward(batch, logits);
}

Result<std::unique_ptr<Model>> Model::load(const std::string& model_dir, const LoadOptions& opts) {
  SPK_ASSIGN(ModelConfig cfg, load_model_config(model_dir));
  SPK_ASSIGN(std::shared_ptr<WeightSource> w, open_checkpoint_weights(model_dir, opts.refuse_nonfinite));
  return load(cfg, std::move(w), opts);
}

}  // namespace spk::rt
