// Synthetic checkpoints: a real Hugging Face layout (config.json, generation_config.json,
// model.safetensors or shards + index, tokenizer.json, tokenizer_config.json) with random weights at a
// sane init, so tests and the demo have models without downloads. Deterministic: the same options give
// the same bytes on every machine (counter-based PRNG, integer-only noise, one IEEE multiply).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "kernels/dtype.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/model/model_config.h"

namespace spk::rt {

struct SynthOptions {
  Arch arch = Arch::qwen3;
  std::string preset = "tiny";  // tiny | small | 8b (dense); tiny | qwen3-30b-a3b (mixture of experts)
  std::string tokenizer_dir;    // holds tokenizer.json (+ tokenizer_config.json)
  std::string out_dir;
  uint64_t seed = 0;
  std::optional<DType> dtype;  // default bf16 (f32/f16 allowed)
  std::optional<bool> tie;     // default: true for qwen3 tiny/small, else false
  uint64_t max_shard_bytes = 2ull << 30;
  // config.json as transformers 5 writes it (rope_parameters, dtype, layer_types) instead of 4.x's
  // (rope_theta + rope_scaling, torch_dtype).
  bool hf5_config = false;
  // Mixture-of-experts archs: the preset's routed-expert count replaced (top-k and expert shapes kept, so
  // the bytes read per token stay the preset's; benchmarks use it to fit a smaller disk).
  std::optional<int> num_experts;
};

struct SynthReport {
  ModelConfig config;
  uint64_t weight_bytes = 0;
  size_t tensors = 0;
  size_t shards = 0;  // 1 = model.safetensors
  double seconds = 0;
  [[nodiscard]] double mb_per_s() const { return seconds > 0 ? weight_bytes / 1e6 / seconds : 0; }
};

// Parses "qwen3|llama|mistral|qwen2|qwen3_moe|qwen2_moe|mixtral" (error lists them).
Result<Arch> parse_synth_arch(const std::string& s);

// Vocab facts read straight from tokenizer.json / tokenizer_config.json (no tokenizer library):
// size = max id over model.vocab and added_tokens + 1.
struct TokenizerFacts {
  int vocab_size = 0;
  int bos_token_id = -1;  // -1 = none
  int eos_token_id = -1;
};
Result<TokenizerFacts> read_tokenizer_facts(const std::string& tokenizer_dir);

// The config the preset describes (validated by the same parser that loads real checkpoints).
Result<ModelConfig> synth_config(const SynthOptions& o, const TokenizerFacts& tok);
// config.json text for it (HF-valid for the architecture), in 4.x or 5.x spelling.
std::string synth_config_json(const ModelConfig& c, bool hf5 = false);

// Tensor names and shapes in HF order for a config.
std::vector<TensorSpec> synth_tensor_specs(const ModelConfig& c);

// Writes the whole directory. Weights first, config.json last: a directory with config.json is complete.
Result<SynthReport> write_synth_model(const SynthOptions& o);

}  // namespace spk::rt
