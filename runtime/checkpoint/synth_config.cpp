// Presets and config.json for synthetic checkpoints. Field sets follow the configs that real checkpoints
// of each family ship (Llama-3.1, Mistral-7B-v0.3, Qwen2.5, Qwen3, Qwen1.5-MoE, Qwen3-MoE, Mixtral), so
// transformers loads them as is. Mixture-of-experts families have their own presets: tiny (CI) and, for
// qwen3_moe, qwen3-30b-a3b (Qwen3-30B-A3B's shapes).
#include <algorithm>
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

bool is_moe(Arch a) {
  return a == Arch::qwen2_moe || a == Arch::qwen3_moe || a == Arch::mixtral || a == Arch::deepseek_v3;
}

// deepseek_v3's attention widths per preset: tiny (CI: every width divisible by 4, layer 0 dense, two expert
// groups) and deepseek-v2-lite (DeepSeek-V2-Lite's shapes: no q_lora, 64 experts top-6 + 2 shared; its
// router is softmax/greedy, this one DeepSeek-V3's sigmoid/grouped one).
MlaConfig mla_preset(const std::string& p) {
  MlaConfig m;
  if (p == "tiny")
    m.q_lora_rank = 32, m.kv_lora_rank = 32, m.qk_nope_head_dim = 16, m.qk_rope_head_dim = 8,
    m.v_head_dim = 12;
  else  // deepseek-v2-lite
    m.q_lora_rank = 0, m.kv_lora_rank = 512, m.qk_nope_head_dim = 128, m.qk_rope_head_dim = 64,
    m.v_head_dim = 128;
  return m;
}

// Shapes and MoE facts of the mixture-of-experts presets. Tiny ones are small enough for golden and TP
// tests (every width divisible by 4) and still route: qwen3_moe keeps layer 1 dense (mlp_only_layers).
Result<Shape> moe_preset(Arch a, const std::string& p, MoeConfig& m) {
  m = MoeConfig{};
  if (p == "tiny") {
    switch (a) {
      case Arch::qwen3_moe:
        m.num_experts = 8, m.top_k = 2, m.moe_intermediate_size = 32, m.norm_topk_prob = true;
        m.mlp_only_layers = {1};
        return Shape{64, 3, 4, 2, 16, 128};
      case Arch::qwen2_moe:
        m.num_experts = 8, m.top_k = 4, m.moe_intermediate_size = 32;
        m.shared_expert_intermediate_size = 64, m.shared_expert_gated = true;
        return Shape{64, 2, 4, 2, 16, 96};
      case Arch::deepseek_v3:
        m.num_experts = 8, m.top_k = 2, m.moe_intermediate_size = 16, m.norm_topk_prob = true;
        m.n_group = 2, m.topk_group = 1, m.routed_scaling_factor = 2.5, m.first_k_dense_replace = 1;
        m.score = MoeScore::sigmoid, m.score_correction_bias = true;
        m.shared_expert_intermediate_size = 16, m.shared_expert_name = "shared_experts";
        return Shape{64, 3, 4, 4, 8, 96};
      default:  // mixtral: experts are intermediate_size wide
        m.naming = MoeNaming::mixtral;
        m.num_experts = 4, m.top_k = 2, m.moe_intermediate_size = 64, m.norm_topk_prob = true;
        return Shape{64, 2, 4, 2, 16, 64};
    }
  }
  if ((p == "qwen3-30b-a3b" || p == "30b-a3b") && a == Arch::qwen3_moe) {
    m.num_experts = 128, m.top_k = 8, m.moe_intermediate_size = 768, m.norm_topk_prob = true;
    return Shape{2048, 48, 32, 4, 128, 6144};
  }
  if ((p == "deepseek-v2-lite" || p == "v2-lite") && a == Arch::deepseek_v3) {
    m.num_experts = 64, m.top_k = 6, m.moe_intermediate_size = 1408, m.norm_topk_prob = false;
    m.n_group = 1, m.topk_group = 1, m.routed_scaling_factor = 1.0, m.first_k_dense_replace = 1;
    m.score = MoeScore::sigmoid, m.score_correction_bias = true;
    m.shared_expert_intermediate_size = 2 * 1408, m.shared_expert_name = "shared_experts";
    return Shape{2048, 27, 16, 16, 64, 10944};
  }
  return make_error("preset '" + p + "' has no " + arch_name(a) + " shape",
                    a == Arch::qwen3_moe     ? "pass --preset tiny or qwen3-30b-a3b"
                    : a == Arch::deepseek_v3 ? "pass --preset tiny or deepseek-v2-lite"
                                             : "pass --preset tiny");
}

Result<Shape> preset_shape(const std::string& p) {
  if (p == "tiny") return Shape{64, 2, 4, 2, 16, 128};
  if (p == "small") return Shape{256, 4, 8, 4, 32, 768};
  if (p == "8b") return Shape{4096, 32, 32, 8, 128, 14336};  // Llama-3.1-8B
  return make_error("unknown preset '" + p + "' for a dense architecture", "pass --preset tiny, small or 8b");
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
    case Arch::qwen2_moe:
      return "Qwen2MoeForCausalLM";
    case Arch::qwen3_moe:
      return "Qwen3MoeForCausalLM";
    case Arch::mixtral:
      return "MixtralForCausalLM";
    case Arch::deepseek_v3:
      return "DeepseekV3ForCausalLM";
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
  if (s == "qwen3_moe") return Arch::qwen3_moe;
  if (s == "qwen2_moe") return Arch::qwen2_moe;
  if (s == "mixtral") return Arch::mixtral;
  if (s == "deepseek_v3") return Arch::deepseek_v3;
  return make_error("unknown architecture '" + s + "'",
                    "pass --arch qwen3, qwen2, llama, mistral, qwen3_moe, qwen2_moe, mixtral or deepseek_v3");
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
  MoeConfig moe;
  SPK_ASSIGN(Shape s, is_moe(o.arch) ? moe_preset(o.arch, o.preset, moe) : preset_shape(o.preset));
  if (o.num_experts) {
    if (!is_moe(o.arch))
      return make_error(
          "--num-experts applies to mixture-of-experts archs, not " + std::string(arch_name(o.arch)),
          "drop --num-experts or pass --arch qwen3_moe, qwen2_moe, mixtral or deepseek_v3");
    if (*o.num_experts < moe.top_k || *o.num_experts > 4096)
      return make_error("--num-experts " + std::to_string(*o.num_experts) + " is outside [top_k " +
                            std::to_string(moe.top_k) + ", 4096]",
                        "pass at least the preset's top-k");
    moe.num_experts = *o.num_experts;
  }
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
  if (is_moe(o.arch)) c.moe = moe;
  if (o.preset == "qwen3-30b-a3b" || o.preset == "30b-a3b") c.vocab_size = std::max(c.vocab_size, 151936);
  if (o.arch == Arch::deepseek_v3)
    c.mla = mla_preset(o.preset);  // Qwen3 pads the embedding past the tokenizer
  c.torch_dtype = dt;
  c.bos_token_id = tok.bos_token_id;
  if (tok.eos_token_id >= 0) c.eos_token_ids = {tok.eos_token_id};
  // Tied for the small presets of qwen3 and for every tiny MoE preset (CI checkpoints stay small: the
  // vocabulary is the real tokenizer's); untied like the real models otherwise.
  c.tie_word_embeddings =
      o.tie.value_or((o.arch == Arch::qwen3 && o.preset != "8b") || (is_moe(o.arch) && o.preset == "tiny"));
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
    case Arch::qwen3_moe:
      c.max_position_embeddings = 40960;
      c.rms_norm_eps = 1e-6;
      c.rope_theta = 1000000.0;
      c.qk_norm = true;
      break;
    case Arch::qwen2_moe:  // Qwen1.5-MoE-A2.7B
      c.max_position_embeddings = 8192;
      c.rms_norm_eps = 1e-6;
      c.rope_theta = 1000000.0;
      c.attention_bias = true;
      break;
    case Arch::mixtral:  // Mixtral-8x7B-v0.1
      c.max_position_embeddings = 32768;
      c.rms_norm_eps = 1e-5;
      c.rope_theta = 1000000.0;
      break;
    case Arch::deepseek_v3: {  // DeepSeek-V3 / V2-Lite: yarn x40 over a 4K original context
      c.max_position_embeddings = 163840;
      c.rms_norm_eps = 1e-6;
      c.rope_theta = 10000.0;
      RopeScaling y;
      y.rope_type = "yarn", y.factor = 40, y.original_max_position_embeddings = 4096;
      y.beta_fast = 32, y.beta_slow = 1, y.mscale = 1.0, y.mscale_all_dim = 1.0;
      if (o.preset != "tiny") y.mscale = y.mscale_all_dim = 0.707;
      c.rope_scaling = y;
      break;
    }
  }
  // Round trip through the real parser: a synthetic config must load like a downloaded one.
  return parse_model_config(synth_config_json(c, o.hf5_config), o.out_dir + "/config.json");
}

std::string synth_config_json(const ModelConfig& c, bool hf5) {
  ojson j;
  j["architectures"] = {c.architecture};
  j["model_type"] = arch_name(c.arch);
  j["attention_dropout"] = 0.0;
  if (c.arch != Arch::mistral && c.arch != Arch::mixtral && c.arch != Arch::qwen2_moe)
    j["attention_bias"] = c.attention_bias;
  if (c.arch == Arch::qwen2_moe) j["qkv_bias"] = c.attention_bias;
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
  if (c.arch == Arch::qwen2 || c.arch == Arch::qwen3 || c.arch == Arch::qwen2_moe ||
      c.arch == Arch::qwen3_moe) {
    j["max_window_layers"] = c.num_hidden_layers;
    j["use_sliding_window"] = false;
    if (hf5) j["layer_types"] = std::vector<std::string>(c.num_hidden_layers, "full_attention");
  }
  if (c.moe) {
    const MoeConfig& m = *c.moe;
    if (c.arch == Arch::mixtral) {
      j["num_local_experts"] = m.num_experts;
      j["router_jitter_noise"] = 0.0;
    } else if (c.arch == Arch::deepseek_v3) {
      j["first_k_dense_replace"] = m.first_k_dense_replace;
      j["moe_intermediate_size"] = m.moe_intermediate_size;
      j["n_group"] = m.n_group;
      j["n_routed_experts"] = m.num_experts;
      j["n_shared_experts"] = m.shared_expert_intermediate_size / m.moe_intermediate_size;
      j["norm_topk_prob"] = m.norm_topk_prob;
      j["routed_scaling_factor"] = m.routed_scaling_factor;
      j["topk_group"] = m.topk_group;
    } else {
      j["decoder_sparse_step"] = m.decoder_sparse_step;
      j["mlp_only_layers"] = m.mlp_only_layers;
      j["moe_intermediate_size"] = m.moe_intermediate_size;
      j["norm_topk_prob"] = m.norm_topk_prob;
      j["num_experts"] = m.num_experts;
      if (m.shared_expert_intermediate_size > 0)
        j["shared_expert_intermediate_size"] = m.shared_expert_intermediate_size;
    }
    j["num_experts_per_tok"] = m.top_k;
    if (c.arch != Arch::deepseek_v3) {
      j["output_router_logits"] = false;
      j["router_aux_loss_coef"] = 0.001;
    }
  }
  if (c.mla) {
    const MlaConfig& m = *c.mla;
    if (m.q_lora_rank > 0)
      j["q_lora_rank"] = m.q_lora_rank;
    else
      j["q_lora_rank"] = nullptr;
    j["kv_lora_rank"] = m.kv_lora_rank;
    j["qk_nope_head_dim"] = m.qk_nope_head_dim;
    j["qk_rope_head_dim"] = m.qk_rope_head_dim;
    j["v_head_dim"] = m.v_head_dim;
    j["rope_interleave"] = m.rope_interleave;
  }
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_key_value_heads"] = c.num_key_value_heads;
  j["rms_norm_eps"] = c.rms_norm_eps;
  // The synthetic presets use default, llama3 (llama) and yarn (deepseek_v3) rope only.
  ojson rope = nullptr;
  if (c.rope_scaling && c.rope_scaling->rope_type == "yarn") {
    const RopeScaling& r = *c.rope_scaling;
    rope = {{"beta_fast", r.beta_fast},
            {"beta_slow", r.beta_slow},
            {"factor", r.factor},
            {"mscale", r.mscale},
            {"mscale_all_dim", r.mscale_all_dim},
            {"original_max_position_embeddings", r.original_max_position_embeddings},
            {"rope_type", r.rope_type}};
  } else if (c.rope_scaling) {
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
  if (c.arch != Arch::llama && c.arch != Arch::deepseek_v3) {
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
