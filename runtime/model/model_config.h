// The architecture facts of a checkpoint, from its config.json. Unknown architectures are refused by
// name. Fields follow the HF names so that a reader can check them against the file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "kernels/dtype.h"
#include "runtime/model/moe_config.h"

namespace spk::rt {

enum class Arch { llama, mistral, qwen2, qwen3, qwen2_moe, qwen3_moe, mixtral };

// Llama 3 "rope_scaling": {"rope_type": "llama3", factor, low_freq_factor, high_freq_factor,
// original_max_position_embeddings}. Other rope types are refused by name.
struct RopeScaling {
  std::string rope_type = "llama3";
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
};

struct ModelConfig {
  Arch arch = Arch::llama;
  std::string
      architecture;  // "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;  // config "head_dim" or hidden_size / num_attention_heads
  int vocab_size = 0;
  int max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  std::optional<RopeScaling> rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections carry a bias (Qwen2: always true)
  bool qk_norm = false;         // per-head RMSNorm on q and k before RoPE (Qwen3)
  int sliding_window = 0;       // 0 = full attention (Mistral may set it)
  DType torch_dtype = DType::bf16;
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;
  std::optional<MoeConfig> moe;  // mixture-of-experts facts (moe_config.h); nullopt for dense models
};

// `path` is only used in error messages.
Result<ModelConfig> parse_model_config(const std::string& json_text, const std::string& path);
Result<ModelConfig> load_model_config(const std::string& model_dir);

const char* arch_name(Arch a);

}  // namespace spk::rt
