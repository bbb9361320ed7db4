// The architecture facts of a checkpoint, from its config.json. Unknown architectures are refused by
// name. Fields follow the HF names so that a reader can check them against the file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "kernels/dtype.h"
#include "runtime/model/mla_config.h"
#include "runtime/model/moe_config.h"
#include "runtime/model/quant_config.h"
#include "runtime/model/rope_config.h"

namespace spk::rt {

enum class Arch { llama, mistral, qwen2, qwen3, qwen2_moe, qwen3_moe, mixtral, deepseek_v3 };

struct ModelConfig {
  Arch arch = Arch::llama;
  std::string
      architecture;  // "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;  // config "head_dim" or hidden_size / num_attention_heads (deepseek_v3: qk_rope_head_dim)
  int vocab_size = 0;
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;              // rope_parameters.rope_theta or rope_theta
  std::optional<RopeScaling> rope_scaling;  // rope_parameters / rope_scaling; empty = default rope
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2: always true)
  bool mlp_bias = false;        // gate/up/down carry a bias (Llama's mlp_bias)
  bool qk_norm = false;         // per-head RMSNorm on q and k before RoPE (Qwen3)
  int sliding_window = 0;       // 0 = full attention (Mistral may set it)
  // Which layers use sliding_window (Qwen2/3 layer_types, or use_sliding_window + max_window_layers);
  // empty = every layer.
  std::vector<bool> sliding_layers;
  // The language model sits under a wrapper (config "text_config", e.g. Mistral3ForConditionalGeneration):
  // its weights may be stored as model.language_model.* or language_model.model.*.
  bool text_config_wrapper = false;
  DType torch_dtype = DType::bf16;
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;
  std::optional<MoeConfig> moe;      // mixture-of-experts facts (moe_config.h); nullopt for dense models
  std::optional<MlaConfig> mla;      // multi-head latent attention (deepseek_v3; mla_config.h)
  std::optional<QuantConfig> quant;  // quantized weights (quant_config.h); nullopt when unquantized

  [[nodiscard]] RopeConfig rope() const { return {rope_theta, rope_scaling}; }
  // 0 = full attention for layer i.
  [[nodiscard]] int layer_window(int i) const {
    if (sliding_window <= 0) return 0;
    if (sliding_layers.empty()) return sliding_window;
    return i >= 0 && i < static_cast<int>(sliding_layers.size()) && sliding_layers[i] ? sliding_window : 0;
  }
};

// `path` is only used in error messages.
Result<ModelConfig> parse_model_config(const std::string& json_text, const std::string& path);
Result<ModelConfig> load_model_config(const std::string& model_dir);

const char* arch_name(Arch a);

}  // namespace spk::rt
