// config.json -> ModelConfig, in both of transformers' spellings (4.x rope_theta/rope_scaling/torch_dtype,
// 5.x rope_parameters/dtype/layer_types) and from a wrapper's text_config. Optional keys take the defaults
// of transformers' config class for that architecture. A key that would change the output and is not
// implemented is an error naming it, never a silent default.
#include "runtime/model/model_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kernels/base/fs.h"
#include "runtime/model/config_reader.h"

namespace spk::rt {

namespace {

using nlohmann::json;

constexpr const char* kSupported =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen2MoeForCausalLM, "
    "Qwen3MoeForCausalLM, MixtralForCausalLM, DeepseekV3ForCausalLM";
constexpr const char* kSupportedTypes =
    "llama, mistral, qwen2, qwen3, qwen2_moe, qwen3_moe, mixtral, deepseek_v3";

struct Family {
  const char* architecture;
  const char* model_type;
  Arch arch;
};
constexpr Family kFamilies[] = {{"LlamaForCausalLM", "llama", Arch::llama},
                                {"MistralForCausalLM", "mistral", Arch::mistral},
                                {"Qwen2ForCausalLM", "qwen2", Arch::qwen2},
                                {"Qwen3ForCausalLM", "qwen3", Arch::qwen3},
                                {"Qwen2MoeForCausalLM", "qwen2_moe", Arch::qwen2_moe},
                                {"Qwen3MoeForCausalLM", "qwen3_moe", Arch::qwen3_moe},
                                {"MixtralForCausalLM", "mixtral", Arch::mixtral},
                                {"DeepseekV3ForCausalLM", "deepseek_v3", Arch::deepseek_v3}};

// transformers' class defaults for keys a config.json may leave out.
struct ClassDefaults {
  int kv_heads;       // 0 = num_attention_heads
  bool head_dim_128;  // Qwen3Config: head_dim 128 whatever hidden / heads is
  int max_position;   // max_position_embeddings
  double theta;       // default_theta
};
ClassDefaults class_defaults(Arch a) {
  switch (a) {
    case Arch::llama:
      return {0, false, 2048, 10000.0};
    case Arch::mistral:
      return {8, false, 131072, 10000.0};
    case Arch::qwen2:
      return {32, false, 32768, 10000.0};
    case Arch::qwen3:
      return {32, true, 32768, 10000.0};
    case Arch::qwen2_moe:
      return {16, false, 32768, 10000.0};
    case Arch::qwen3_moe:
      return {4, false, 32768, 10000.0};
    case Arch::mixtral:
      return {8, false, 131072, 1000000.0};
    case Arch::deepseek_v3:  // DeepseekV3Config (num_key_value_heads must equal the query heads anyway)
      return {0, false, 4096, 10000.0};
  }
  return {0, false, 2048, 10000.0};
}

// Architecture from `architectures`; a wrapper (text_config) is recognised by its text model_type.
Status parse_architecture(const ConfigReader& top, const ConfigReader& r, bool wrapper, ModelConfig& c) {
  if (wrapper) {
    SPK_ASSIGN(std::string type, r.string("model_type", ""));
    for (const Family& f : kFamilies)
      if (type == f.model_type) {
        c.arch = f.arch, c.text_config_wrapper = true;
        // The wrapper's name (e.g. Mistral3ForConditionalGeneration), as transformers reports it.
        const json& archs = top.j.contains("architectures") ? top.j["architectures"] : json();
        c.architecture = archs.is_array() && !archs.empty() && archs[0].is_string()
                             ? archs[0].get<std::string>()
                             : f.architecture;
        return ok_status();
      }
    return r.bad("model_type",
                 "is \"" + type + "\"; the text model of a wrapper must be one of " + kSupportedTypes);
  }
  if (!top.present("architectures"))
    return top.bad("architectures", "is missing (supported: " + std::string(kSupported) + ")");
  const json& archs = top.j["architectures"];
  if (!archs.is_array() || archs.empty() || !archs[0].is_string())
    return top.bad("architectures", "must be a non-empty list of strings, got " + ConfigReader::dump(archs));
  c.architecture = archs[0].get<std::string>();
  for (const Family& f : kFamilies)
    if (c.architecture == f.architecture) {
      c.arch = f.arch;
      return ok_status();
    }
  return make_error(
      top.path + ": architecture \"" + c.architecture + "\" is not supported (supported: " + kSupported + ")",
      "use a checkpoint of a supported architecture");
}

Status parse_shape(const ConfigReader& r, ModelConfig& c) {
  SPK_ASSIGN(c.hidden_size, r.integer("hidden_size"));
  SPK_ASSIGN(c.intermediate_size, r.integer("intermediate_size"));
  SPK_ASSIGN(c.num_hidden_layers, r.integer("num_hidden_layers"));
  SPK_ASSIGN(c.num_attention_heads, r.integer("num_attention_heads"));
  // Class defaults when the key is absent (null means "same as the query heads" everywhere).
  const ClassDefaults d = class_defaults(c.arch);
  const int kv_default =
      !r.j.contains("num_key_value_heads") && d.kv_heads > 0 ? d.kv_heads : c.num_attention_heads;
  SPK_ASSIGN(c.num_key_value_heads, r.integer("num_key_value_heads", kv_default));
  if (c.num_key_value_heads > c.num_attention_heads || c.num_attention_heads % c.num_key_value_heads != 0)
    return r.bad("num_key_value_heads", "(" + std::to_string(c.num_key_value_heads) +
                                            ") must divide num_attention_heads (" +
                                            std::to_string(c.num_attention_heads) + ")");
  if (c.arch == Arch::deepseek_v3) {  // MLA: the heads' widths are the mla keys (parse_family)
    if (c.num_key_value_heads != c.num_attention_heads)
      return r.bad("num_key_value_heads",
                   "(" + std::to_string(c.num_key_value_heads) + ") must equal num_attention_heads (" +
                       std::to_string(c.num_attention_heads) +
                       ") for deepseek_v3: every query head has its own up-projected key");
  } else {
    // Qwen3's class default is 128 whatever the hidden size; the others derive it.
    const bool derive = !d.head_dim_128 || r.j.contains("head_dim");
    if (derive && !r.present("head_dim") && c.hidden_size % c.num_attention_heads != 0)
      return r.bad("head_dim", "is missing and hidden_size is not a multiple of num_attention_heads");
    SPK_ASSIGN(c.head_dim, r.integer("head_dim", derive ? c.hidden_size / c.num_attention_heads : 128));
    if (c.head_dim % 2 != 0)
      return r.bad("head_dim", "must be even for RoPE, got " + std::to_string(c.head_dim));
  }
  SPK_ASSIGN(c.vocab_size, r.integer("vocab_size"));
  SPK_ASSIGN(c.max_position_embeddings, r.integer("max_position_embeddings", d.max_position));
  SPK_ASSIGN(c.rms_norm_eps, r.number("rms_norm_eps", 1e-6));
  SPK_ASSIGN(std::string act, r.string("hidden_act", "silu"));
  if (act != "silu" && act != "swish")
    return r.bad("hidden_act", "is \"" + act + "\"; only \"silu\" (alias \"swish\") is supported");
  return ok_status();
}

// Per-layer sliding windows, as each transformers family decides them. Mistral / Mixtral: sliding_window
// on every layer (class default 4096 / none; null = full). Qwen3-MoE: every layer, only with
// use_sliding_window. Qwen2/3 and Qwen2-MoE: only with use_sliding_window, on the layers layer_types marks
// "sliding_attention", or when it is absent on layers >= max_window_layers (Qwen2-MoE: the even layers
// below max_window_layers). Llama has none (transformers ignores the key).
Status parse_sliding(const ConfigReader& r, ModelConfig& c) {
  if (c.arch == Arch::llama || c.arch == Arch::deepseek_v3) return ok_status();
  const bool given = r.j.contains("sliding_window");
  if (c.arch == Arch::mistral || c.arch == Arch::mixtral) {
    const int def = !given && c.arch == Arch::mistral ? 4096 : 0;
    SPK_ASSIGN(c.sliding_window, r.integer("sliding_window", def, 0));
    return ok_status();
  }
  SPK_ASSIGN(bool use, r.boolean("use_sliding_window", false));
  if (c.arch == Arch::qwen3_moe) {
    SPK_ASSIGN(int w, r.integer("sliding_window", given ? 0 : 4096, 0));
    if (use) c.sliding_window = w;
    return ok_status();
  }
  SPK_ASSIGN(int window, r.integer("sliding_window", r.j.contains("sliding_window") ? 0 : 4096, 0));
  SPK_ASSIGN(int max_window_layers, r.integer("max_window_layers", 28, 0));
  std::vector<bool> sliding(c.num_hidden_layers, false);
  if (r.present("layer_types")) {
    const json& lt = r.j["layer_types"];
    if (!lt.is_array() || static_cast<int>(lt.size()) != c.num_hidden_layers)
      return r.bad("layer_types", "must list num_hidden_layers (" + std::to_string(c.num_hidden_layers) +
                                      ") entries, got " + ConfigReader::dump(lt));
    for (int i = 0; i < c.num_hidden_layers; ++i) {
      const json& t = lt[i];
      if (t == "sliding_attention") {
        sliding[i] = true;
      } else if (t != "full_attention") {
        return r.bad("layer_types", "entry " + std::to_string(i) + " is " + ConfigReader::dump(t) +
                                        "; supported: \"full_attention\", \"sliding_attention\"");
      }
    }
  } else if (c.arch == Arch::qwen2_moe) {
    for (int i = 0; i < std::min(max_window_layers, c.num_hidden_layers); i += 2) sliding[i] = true;
  } else {
    for (int i = max_window_layers; i < c.num_hidden_layers; ++i) sliding[i] = true;
  }
  if (!use || window == 0) return ok_status();  // transformers: sliding_window = None -> full everywhere
  c.sliding_window = window;
  c.sliding_layers = std::move(sliding);
  return ok_status();
}

Status parse_family(const ConfigReader& r, ModelConfig& c) {
  switch (c.arch) {
    case Arch::llama: {
      SPK_ASSIGN(c.attention_bias, r.boolean("attention_bias", false));
      SPK_ASSIGN(c.mlp_bias, r.boolean("mlp_bias", false));
      break;
    }
    case Arch::mistral:  // transformers' Mistral and Mixtral have no biases whatever the config says
    case Arch::mixtral:
      break;
    case Arch::qwen2:
      c.attention_bias = true;  // Qwen2 q/k/v projections always carry a bias
      break;
    case Arch::qwen2_moe: {  // q/k/v only (qkv_bias), never o_proj
      SPK_ASSIGN(c.attention_bias, r.boolean("qkv_bias", true));
      break;
    }
    case Arch::qwen3:
    case Arch::qwen3_moe: {
      SPK_ASSIGN(c.attention_bias, r.boolean("attention_bias", false));
      c.qk_norm = true;
      break;
    }
    case Arch::deepseek_v3: {  // bias on q_a_proj, kv_a_proj_with_mqa and o_proj
      SPK_ASSIGN(c.attention_bias, r.boolean("attention_bias", false));
      SPK_ASSIGN(c.mla, parse_mla_config(r));
      c.head_dim = c.mla->qk_rope_head_dim;  // what DeepseekV3Config writes as head_dim
      break;
    }
  }
  return parse_sliding(r, c);
}

Result<DType> parse_torch_dtype(const ConfigReader& r) {
  const char* key = r.present("dtype") ? "dtype" : (r.present("torch_dtype") ? "torch_dtype" : nullptr);
  if (key == nullptr) return DType::bf16;
  const json& v = r.j[key];
  const std::string s = v.is_string() ? v.get<std::string>() : "";
  if (s == "bfloat16") return DType::bf16;
  if (s == "float16") return DType::f16;
  if (s == "float32") return DType::f32;
  return r.bad(key, "must be \"bfloat16\", \"float16\" or \"float32\", got " + ConfigReader::dump(v));
}

Status parse_token_ids(const ConfigReader& r, ModelConfig& c) {
  SPK_ASSIGN(c.bos_token_id, r.integer("bos_token_id", -1, 0));
  if (!r.present("eos_token_id")) return ok_status();
  const json& e = r.j["eos_token_id"];
  auto one = [&](const json& v) -> Status {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.vocab_size)
      return r.bad("eos_token_id",
                   "entry " + ConfigReader::dump(v) + " is not a token id in [0, vocab_size)");
    c.eos_token_ids.push_back(v.get<int>());
    return ok_status();
  };
  if (!e.is_array()) return one(e);
  for (const auto& v : e) SPK_TRY(one(v));
  return ok_status();
}

}  // namespace

const char* arch_name(Arch a) {
  for (const Family& f : kFamilies)
    if (f.arch == a) return f.model_type;
  return "?";
}

Result<ModelConfig> parse_model_config(const std::string& json_text, const std::string& path) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {
    return make_error(path + ": not valid JSON: " + e.what(), "fix config.json or regenerate the checkpoint");
  }
  if (!j.is_object()) return make_error(path + ": not a JSON object", "fix config.json");
  const ConfigReader top{j, path, ""};
  const bool wrapper = top.present("text_config");
  if (wrapper && !j["text_config"].is_object())
    return top.bad("text_config", "must be an object, got " + ConfigReader::dump(j["text_config"]));
  const ConfigReader r = wrapper ? top.sub(j["text_config"], "text_config") : top;

  ModelConfig c;
  try {
    SPK_TRY(parse_architecture(top, r, wrapper, c));
    SPK_TRY(parse_shape(r, c));
    SPK_ASSIGN(RopeConfig rope,
               parse_rope_config(r, class_defaults(c.arch).theta, c.max_position_embeddings));
    c.rope_theta = rope.theta, c.rope_scaling = rope.scaling;
    // A wrapper's own tie_word_embeddings decides (transformers ties the wrapper model's lm_head by it:
    // Mistral3 saves none with text_config false, top-level true); dtype may sit at either level.
    const ConfigReader& tie = wrapper && top.present("tie_word_embeddings") ? top : r;
    SPK_ASSIGN(c.tie_word_embeddings, tie.boolean("tie_word_embeddings", false));
    const ConfigReader& dt = r.present("dtype") || r.present("torch_dtype") ? r : top;
    SPK_ASSIGN(c.torch_dtype, parse_torch_dtype(dt));
    SPK_TRY(parse_family(r, c));
    std::string family_arch;  // the text model's class, also under a wrapper
    for (const Family& f : kFamilies)
      if (f.arch == c.arch) family_arch = f.architecture;
    SPK_ASSIGN(c.moe, parse_moe_config(r.j, path, family_arch, c.num_hidden_layers));
    const ConfigReader& ids = r.present("eos_token_id") || r.present("bos_token_id") ? r : top;
    SPK_TRY(parse_token_ids(ids, c));
    SPK_ASSIGN(c.quant, find_quant_config(j, path, ""));
  } catch (const json::exception& e) {  // a typed read above that the checks missed: never abort
    return make_error(path + ": unexpected value: " + e.what(),
                      "fix config.json or regenerate the checkpoint");
  }
  return c;
}

Result<ModelConfig> load_model_config(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  SPK_ASSIGN(std::string text, read_file(path));
  SPK_ASSIGN(ModelConfig c, parse_model_config(text, path));
  if (!c.quant) {
    SPK_ASSIGN(c.quant, find_quant_config(nlohmann::json::object(), path, model_dir));
  }
  return c;
}

}  // namespace spk::rt
