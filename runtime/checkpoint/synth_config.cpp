// Presets and config.json for synthetic checkpoints. Field sets follow the configs that real checkpoints
// of each family ship (Llama-3.1, Mistral-7B-v0.3, Qwen2.5, Qwen3), so transformers loads them as is.
#include <nlohmann/json.hpp>

#include "kernels/base/fs.h"
#include "runtime/checkpoint/synth_model.h"

namespace spk::rt {

namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

struct Shape {
  int hidden, layers, heads, kv_heads, head_dim, intermediate;
};

Result<Shape> preset_shape(const std::string& p) {
  if (p == "tiny") return Shape{64, 2, 4, 2, 16, 128};
  if (p == "small") return Shape{256, 4, 8, 4, 32, 768};
  if (p == "8b") return Shape{4096, 32, 32, 8, 128, 14336};  // Llama-3.1-8B
  return make_error("unknown preset '" + p + "'", "pass --preset tiny, small or 8b");
}

const char* architecture_of(Arch a) {
  switch (a) {
    case Arch::llama:
      return "LlamaForCausalLM";
    case Arch::mistral:
      return "MistralForCausalLM";
    case Arch::qwen2:
      return "Qwen2ForCausalLM";
    case Arch::qwen3:
      return "Qwen3ForCausalLM";
  }
  return "?";
}

// "<|im_end|>" or {"content": "<|im_end|>", ...} -> id via added_tokens, then model.vocab.
int token_id(const json& tok, const json& spec) {
  std::string s;
  if (spec.is_string()) s = spec.get<std::string>();
  if (spec.is_object() && spec.contains("content") && spec["content"].is_string()) s = spec["content"];
  if (s.empty()) return -1;
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
    for (const auto& a : tok["added_tokens"])
      if (a.is_object() && a.value("content", "") == s && a.contains("id") && a["id"].is_number_integer())
        return a["id"].get<int>();
  if (tok.contains("model") && tok["model"].contains("vocab") && tok["model"]["vocab"].is_object()) {
    const auto& v = tok["model"]["vocab"];
    if (auto it = v.find(s); it != v.end() && it->is_number_integer()) return it->get<int>();
  }
  return -1;
}

}  // namespace

Result<Arch> parse_synth_arch(const std::string& s) {
  if (s == "qwen3") return Arch::qwen3;
  if (s == "qwen2") return Arch::qwen2;
  if (s == "llama") return Arch::llama;
  if (s == "mistral") return Arch::mistral;
  return make_error("unknown architecture '" + s + "'", "pass --arch qwen3, qwen2, llama or mistral");
}

Result<TokenizerFacts> read_tokenizer_facts(const std::string& dir) {
  const std::string path = dir + "/tokenizer.json";
  SPK_ASSIGN(std::string text, read_file(path));
  json tok = json::parse(text, nullptr, false);
  if (tok.is_discarded() || !tok.is_object())
    return make_error(path + " is not a JSON object",
                      "pass --tokenizer a directory holding a HF tokenizer.json");
  TokenizerFacts f;
  int64_t max_id = -1;
  if (tok.contains("model") && tok["model"].is_object() && tok["model"].contains("vocab")) {
    const json& v = tok["model"]["vocab"];
    if (v.is_object()) {  // BPE / WordPiece: token -> id
      for (const auto& [k, id] : v.items())
        if (id.is_number_integer()) max_id = std::max<int64_t>(max_id, id.get<int64_t>());
    } else if (v.is_array()) {  // Unigram: [[piece, score], ...], id = position
      max_id = static_cast<int64_t>(v.size()) - 1;
    }
  }
  if (tok.contains("added_tokens") && tok["added_tokens"].is_array())
    for (const auto& a : tok["added_tokens"])
      if (a.is_object() && a.contains("id") && a["id"].is_number_integer())
        max_id = std::max<int64_t>(max_id, a["id"].get<int64_t>());
  if (max_id < 0 || max_id >= INT32_MAX)
    return make_error(path + ": no token ids in model.vocab or added_tokens",
                      "pass --tokenizer a HF tokenizer directory");
  f.vocab_size = static_cast<int>(max_id + 1);

  const std::string cfg_path = dir + "/tokenizer_config.json";
  auto cfg_text = read_file(cfg_path);
  if (cfg_text.ok()) {
    json cfg = json::parse(*cfg_text, nullptr, false);
    if (cfg.is_object()) {
      if (cfg.contains("bos_token")) f.bos_token_id = token_id(tok, cfg["bos_token"]);
      if (cfg.contains("eos_token")) f.eos_token_id = token_id(tok, cfg["eos_token"]);
    }
  }
  return f;
}

Result<ModelConfig> synth_config(const SynthOptions& o, const TokenizerFacts& tok) {
  SPK_ASSIGN(Shape s, preset_shape(o.preset));
  const DType dt = o.dtype.value_or(DType::bf16);
  if (dt != DType::bf16 && dt != DType::f16 && dt != DType::f32)
    return make_error("dtype " + std::string(dtype_name(dt)) + " is not a weight dtype",
                      "pass --dtype bf16, f16 or f32");
  ModelConfig c;
  c.arch = o.arch;
  c.architecture = architecture_of(o.arch);
  c.hidden_size = s.hidden;
  c.intermediate_size = s.intermediate;
  c.num_hidden_layers = s.layers;
  c.num_attention_heads = s.heads;
  c.num_key_value_heads = s.kv_heads;
  c.head_dim = s.head_dim;
  c.vocab_size = tok.vocab_size;
  c.torch_dtype = dt;
  c.bos_token_id = tok.bos_token_id;
  if (tok.eos_token_id >= 0) c.eos_token_ids = {tok.eos_token_id};
  c.tie_word_embeddings = o.tie.value_or(o.arch == Arch::qwen3 && o.preset != "8b");
  switch (o.arch) {
    case Arch::llama:
      c.max_position_embeddings = 131072;
      c.rms_norm_eps = 1e-5;
      c.rope_theta = 500000.0;
      c.rope_scaling = RopeScaling{};  // llama3: factor 8, low 1, high 4, original 8192
      break;
    case Arch::mistral:
      c.max_position_embeddings = 32768;
      c.rms_norm_eps = 1e-5;
      c.rope_theta = 1000000.0;
      break;
    case Arch::qwen2:
      c.max_position_embeddings = 32768;
      c.rms_norm_eps = 1e-6;
      c.rope_theta = 1000000.0;
      c.attention_bias = true;
      break;
    case Arch::qwen3:
      c.max_position_embeddings = 40960;
      c.rms_norm_eps = 1e-6;
      c.rope_theta = 1000000.0;
      c.qk_norm = true;
      break;
  }
  // Round trip through the real parser: a synthetic config must load like a downloaded one.
  return parse_model_config(synth_config_json(c, o.hf5_config), o.out_dir + "/config.json");
}

std::string synth_config_json(const ModelConfig& c, bool hf5) {
  ojson j;
  j["architectures"] = {c.architecture};
  j["model_type"] = arch_name(c.arch);
  j["attention_dropout"] = 0.0;
  if (c.arch != Arch::mistral) j["attention_bias"] = c.attention_bias;
  if (c.bos_token_id >= 0)
    j["bos_token_id"] = c.bos_token_id;
  else
    j["bos_token_id"] = nullptr;
  if (c.eos_token_ids.size() == 1)
    j["eos_token_id"] = c.eos_token_ids[0];
  else
    j["eos_token_id"] = c.eos_token_ids;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["hidden_size"] = c.hidden_size;
  j["initializer_range"] = 0.02;
  j["intermediate_size"] = c.intermediate_size;
  j["max_position_embeddings"] = c.max_position_embeddings;
  if (c.arch == Arch::llama) {
    j["mlp_bias"] = c.mlp_bias;
    j["pretraining_tp"] = 1;
  }
  if (c.arch == Arch::qwen2 || c.arch == Arch::qwen3) {
    j["max_window_layers"] = c.num_hidden_layers;
    j["use_sliding_window"] = false;
    if (hf5) j["layer_types"] = std::vector<std::string>(c.num_hidden_layers, "full_attention");
  }
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["rms_norm_eps"] = c.rms_norm_eps;
  // The synthetic presets use default and llama3 rope only.
  ojson rope = nullptr;
  if (c.rope_scaling) {
    const RopeScaling& r = *c.rope_scaling;
    rope = {{"factor", r.factor},
            {"high_freq_factor", r.high_freq_factor},
            {"low_freq_factor", r.low_freq_factor},
            {"original_max_position_embeddings", r.original_max_position_embeddings},
            {"rope_type", r.rope_type}};
  }
  if (hf5) {  // transformers 5: one rope_parameters object holds the theta and the type
    if (rope.is_null()) rope = {{"rope_type", "default"}};
    rope["rope_theta"] = c.rope_theta;
    j["rope_parameters"] = rope;
  } else {
    j["rope_scaling"] = rope;
    j["rope_theta"] = c.rope_theta;
  }
  if (c.arch != Arch::llama) {
    if (c.sliding_window > 0)
      j["sliding_window"] = c.sliding_window;
    else
      j["sliding_window"] = nullptr;
  }
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j[hf5 ? "dtype" : "torch_dtype"] = c.torch_dtype == DType::f32   ? "float32"
                                     : c.torch_dtype == DType::f16 ? "float16"
                                                                   : "bfloat16";
  j["transformers_version"] = hf5 ? "5.17.0" : "4.51.0";
  j["use_cache"] = true;
  j["vocab_size"] = c.vocab_size;
  return j.dump(2) + "\n";
}

}  // namespace spk::rt
