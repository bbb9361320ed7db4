// config.json -> ModelConfig. Required keys are the shape facts; optional keys take the defaults that
// transformers' config class for that architecture uses. Every bad key is named with the file.
#include "runtime/model/model_config.h"

#include <nlohmann/json.hpp>

#include "kernels/base/fs.h"

namespace spk::rt {

namespace {

using nlohmann::json;

constexpr const char* kSupported =
    "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen2MoeForCausalLM, "
    "Qwen3MoeForCausalLM, MixtralForCausalLM";

struct Reader {
  const json& j;
  const std::string& path;
  std::string prefix;  // "rope_scaling." for nested objects

  Error bad(const std::string& key, const std::string& what) const {
    return make_error(path + ": key \"" + prefix + key + "\" " + what,
                      "fix config.json or regenerate the checkpoint");
  }
  bool present(const char* key) const { return j.contains(key) && !j[key].is_null(); }

  // Positive (or >= min) integer; required when `def` is empty.
  Result<int> integer(const char* key, std::optional<int> def = {}, int min = 1) const {
    if (!present(key)) {
      if (def) return *def;
      return bad(key, "is missing");
    }
    const json& v = j[key];
    if (!v.is_number_integer()) return bad(key, "must be an integer, got " + v.dump());
    const auto x = v.get<int64_t>();
    if (x < min || x > INT32_MAX)
      return bad(key, "must be an integer >= " + std::to_string(min) + ", got " + v.dump());
    return static_cast<int>(x);
  }
  Result<double> number(const char* key, double def) const {
    if (!present(key)) return def;
    const json& v = j[key];
    if (!v.is_number()) return bad(key, "must be a number, got " + v.dump());
    const double x = v.get<double>();
    if (!(x > 0)) return bad(key, "must be > 0, got " + v.dump());
    return x;
  }
  Result<bool> boolean(const char* key, bool def) const {
    if (!present(key)) return def;
    if (!j[key].is_boolean()) return bad(key, "must be true or false, got " + j[key].dump());
    return j[key].get<bool>();
  }
};

Result<std::optional<RopeScaling>> parse_rope_scaling(const Reader& r) {
  if (!r.present("rope_scaling")) return std::optional<RopeScaling>{};
  const json& rs = r.j["rope_scaling"];
  if (!rs.is_object()) return r.bad("rope_scaling", "must be an object or null, got " + rs.dump());
  std::string type;
  for (const char* k : {"rope_type", "type"}) {
    if (rs.contains(k) && rs[k].is_string()) {
      type = rs[k].get<std::string>();
      break;
    }
  }
  if (type.empty()) return r.bad("rope_scaling", "has no string \"rope_type\"");
  if (type == "default") return std::optional<RopeScaling>{};
  if (type != "llama3")
    return r.bad("rope_scaling",
                 "has rope_type \"" + type + "\", which is not supported (supported: llama3, default)");
  const Reader sub{rs, r.path, "rope_scaling."};
  RopeScaling out;
  for (const char* k : {"factor", "low_freq_factor", "high_freq_factor"})
    if (!sub.present(k)) return sub.bad(k, "is missing");
  SPK_ASSIGN(out.factor, sub.number("factor", 0));
  SPK_ASSIGN(out.low_freq_factor, sub.number("low_freq_factor", 0));
  SPK_ASSIGN(out.high_freq_factor, sub.number("high_freq_factor", 0));
  SPK_ASSIGN(out.original_max_position_embeddings, sub.integer("original_max_position_embeddings"));
  if (out.high_freq_factor <= out.low_freq_factor)
    return sub.bad("high_freq_factor", "must be greater than low_freq_factor");
  return std::optional<RopeScaling>(out);
}

Result<DType> parse_torch_dtype(const Reader& r) {
  const char* key = r.present("torch_dtype") ? "torch_dtype" : (r.present("dtype") ? "dtype" : nullptr);
  if (key == nullptr) return DType::bf16;
  const json& v = r.j[key];
  const std::string s = v.is_string() ? v.get<std::string>() : "";
  if (s == "bfloat16") return DType::bf16;
  if (s == "float16") return DType::f16;
  if (s == "float32") return DType::f32;
  return r.bad(key, "must be \"bfloat16\", \"float16\" or \"float32\", got " + v.dump());
}

}  // namespace

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::llama:
      return "llama";
    case Arch::mistral:
      return "mistral";
    case Arch::qwen2:
      return "qwen2";
    case Arch::qwen3:
      return "qwen3";
    case Arch::qwen2_moe:
      return "qwen2_moe";
    case Arch::qwen3_moe:
      return "qwen3_moe";
    case Arch::mixtral:
      return "mixtral";
  }
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
  const Reader r{j, path, ""};
  ModelConfig c;

  if (!r.present("architectures"))
    return r.bad("architectures", "is missing (supported: " + std::string(kSupported) + ")");
  const json& archs = j["architectures"];
  if (!archs.is_array() || archs.empty() || !archs[0].is_string())
    return r.bad("architectures", "must be a non-empty list of strings, got " + archs.dump());
  c.architecture = archs[0].get<std::string>();
  if (c.architecture == "LlamaForCausalLM") {
    c.arch = Arch::llama;
  } else if (c.architecture == "MistralForCausalLM") {
    c.arch = Arch::mistral;
  } else if (c.architecture == "Qwen2ForCausalLM") {
    c.arch = Arch::qwen2;
  } else if (c.architecture == "Qwen3ForCausalLM") {
    c.arch = Arch::qwen3;
  } else if (c.architecture == "Qwen2MoeForCausalLM") {
    c.arch = Arch::qwen2_moe;
  } else if (c.architecture == "Qwen3MoeForCausalLM") {
    c.arch = Arch::qwen3_moe;
  } else if (c.architecture == "MixtralForCausalLM") {
    c.arch = Arch::mixtral;
  } else {
    return make_error(
        path + ": architecture \"" + c.architecture + "\" is not supported (supported: " + kSupported + ")",
        "use a checkpoint of a supported architecture");
  }
  if (r.present("hidden_act") && j["hidden_act"] != "silu")
    return r.bad("hidden_act", "is " + j["hidden_act"].dump() + "; only \"silu\" is supported");

  SPK_ASSIGN(c.hidden_size, r.integer("hidden_size"));
  SPK_ASSIGN(c.intermediate_size, r.integer("intermediate_size"));
  SPK_ASSIGN(c.num_hidden_layers, r.integer("num_hidden_layers"));
  SPK_ASSIGN(c.num_attention_heads, r.integer("num_attention_heads"));
  SPK_ASSIGN(c.num_key_value_heads, r.integer("num_key_value_heads", c.num_attention_heads));
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    return r.bad("num_key_value_heads", "(" + std::to_string(c.num_key_value_heads) +
                                            ") must divide num_attention_heads (" +
                                            std::to_string(c.num_attention_heads) + ")");
  if (!r.present("head_dim") && c.hidden_size % c.num_attention_heads != 0)
    return r.bad("head_dim", "is missing and hidden_size is not a multiple of num_attention_heads");
  SPK_ASSIGN(c.head_dim, r.integer("head_dim", c.hidden_size / c.num_attention_heads));
  SPK_ASSIGN(c.vocab_size, r.integer("vocab_size"));
  SPK_ASSIGN(c.max_position_embeddings, r.integer("max_position_embeddings"));
  SPK_ASSIGN(c.rms_norm_eps, r.number("rms_norm_eps", 1e-6));
  SPK_ASSIGN(c.rope_theta, r.number("rope_theta", 10000.0));
  SPK_ASSIGN(c.rope_scaling, parse_rope_scaling(r));
  SPK_ASSIGN(c.tie_word_embeddings, r.boolean("tie_word_embeddings", false));
  SPK_ASSIGN(c.torch_dtype, parse_torch_dtype(r));

  switch (c.arch) {
    case Arch::llama: {
      SPK_ASSIGN(c.attention_bias, r.boolean("attention_bias", false));
      break;
    }
    case Arch::mistral:
    case Arch::mixtral: {
      SPK_ASSIGN(c.sliding_window, r.integer("sliding_window", 0, 0));
      break;
    }
    case Arch::qwen2:
    case Arch::qwen3:
    case Arch::qwen2_moe:
    case Arch::qwen3_moe: {
      if (c.arch == Arch::qwen2) {
        c.attention_bias = true;  // Qwen2 q/k/v projections always carry a bias
      } else if (c.arch == Arch::qwen2_moe) {
        SPK_ASSIGN(c.attention_bias, r.boolean("qkv_bias", true));  // q/k/v only, never o_proj
      } else {
        SPK_ASSIGN(c.attention_bias, r.boolean("attention_bias", false));
        c.qk_norm = true;
      }
      SPK_ASSIGN(bool sw, r.boolean("use_sliding_window", false));
      if (sw) return r.bad("use_sliding_window", "is true; Qwen sliding-window layers are not supported");
      break;
    }
  }

  SPK_ASSIGN(c.moe, parse_moe_config(j, path, c.architecture, c.num_hidden_layers));
  SPK_ASSIGN(c.bos_token_id, r.integer("bos_token_id", -1, 0));
  if (r.present("eos_token_id")) {
    const json& e = j["eos_token_id"];
    auto one = [&](const json& v) -> Status {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= c.vocab_size)
        return r.bad("eos_token_id", "entry " + v.dump() + " is not a token id in [0, vocab_size)");
      c.eos_token_ids.push_back(v.get<int>());
      return ok_status();
    };
    if (e.is_array()) {
      for (const auto& v : e) SPK_TRY(one(v));
    } else {
      SPK_TRY(one(e));
    }
  }
  return c;
}

Result<ModelConfig> load_model_config(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  SPK_ASSIGN(std::string text, read_file(path));
  return parse_model_config(text, path);
}

}  // namespace spk::rt
