#include "runtime/model/quant_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>

#include "kernels/base/fs.h"
#include "runtime/model/config_reader.h"

namespace spk::rt {
namespace {

constexpr const char* kBuilt =
    "this build loads quant_method \"gptq\" with bits 4 (checkpoint_format \"gptq\") and quant_method "
    "\"compressed-tensors\" with format \"pack-quantized\", weights num_bits 4 type \"int\" strategy "
    "\"group\" or \"channel\" and no input_activations (W4A16)";

Error not_built(const ConfigReader& r, const std::string& key, const std::string& value) {
  return make_error(r.path + ": key \"" + r.prefix + key + "\" is " + value + ": not built yet; " + kBuilt +
                        " (see issue 22)",
                    "use a GPTQ or compressed-tensors W4A16 4-bit, or an unquantized (bf16/f16/f32) "
                    "checkpoint of this model");
}

std::string quoted(const nlohmann::json& v) { return ConfigReader::dump(v); }

// A key that must be absent, null, false or an empty object/list (what the producers write when unused).
Status require_unset(const ConfigReader& r, const char* key, const std::string& what) {
  if (!r.present(key)) return ok_status();
  const nlohmann::json& v = r.j[key];
  if ((v.is_boolean() && !v.get<bool>()) || ((v.is_object() || v.is_array()) && v.empty()))
    return ok_status();
  return not_built(r, key, quoted(v) + " (" + what + ")");
}

// compressed-tensors: format pack-quantized, one config group targeting Linear with int 4-bit weights only.
Status parse_compressed_tensors(const ConfigReader& r, QuantConfig& c) {
  const nlohmann::json& q = r.j;
  SPK_ASSIGN(c.format, r.string("format", ""));
  if (c.format != "pack-quantized")
    return not_built(r, "format", quoted(q.value("format", nlohmann::json())));
  SPK_TRY(require_unset(r, "kv_cache_scheme", "a quantized KV cache"));
  SPK_TRY(require_unset(r, "sparsity_config", "sparse weights"));
  SPK_TRY(require_unset(r, "transform_config", "weight transforms"));
  SPK_ASSIGN(std::string status, r.string("quantization_status", "compressed"));
  if (status != "compressed")
    return not_built(r, "quantization_status", "\"" + status + "\" (only compressed checkpoints are packed)");
  if (!r.present("config_groups") || !q["config_groups"].is_object() || q["config_groups"].size() != 1)
    return not_built(r, "config_groups",
                     (r.present("config_groups") ? quoted(q["config_groups"]) : std::string("missing")) +
                         " (this build loads exactly one config group)");
  const auto group = q["config_groups"].begin();
  const std::string gname = group.key();
  const nlohmann::json& g = group.value();
  const ConfigReader gr = r.sub(g, "config_groups." + gname);
  if (!g.is_object()) return r.bad("config_groups." + gname, "must be an object, got " + quoted(g));
  if (!gr.present("targets") || g["targets"] != nlohmann::json::array({"Linear"}))
    return not_built(gr, "targets",
                     (gr.present("targets") ? quoted(g["targets"]) : std::string("missing")) +
                         " (this build quantizes every Linear: targets [\"Linear\"])");
  SPK_ASSIGN(std::string gformat, gr.string("format", c.format));
  if (gformat != c.format) return not_built(gr, "format", "\"" + gformat + "\"");
  SPK_TRY(require_unset(gr, "input_activations", "quantized activations"));
  SPK_TRY(require_unset(gr, "output_activations", "quantized outputs"));
  if (!gr.present("weights") || !g["weights"].is_object())
    return gr.bad("weights", "must be an object, got " + quoted(g.value("weights", nlohmann::json())));
  const nlohmann::json& w = g["weights"];
  const ConfigReader wr = gr.sub(w, "weights");
  SPK_ASSIGN(c.bits, wr.integer("num_bits"));
  if (c.bits != 4) return not_built(wr, "num_bits", std::to_string(c.bits));
  SPK_ASSIGN(std::string type, wr.string("type", "int"));
  if (type != "int") return not_built(wr, "type", "\"" + type + "\"");
  SPK_ASSIGN(c.sym, wr.boolean("symmetric", true));
  SPK_TRY(require_unset(wr, "dynamic", "dynamic weight quantization"));
  SPK_TRY(require_unset(wr, "block_structure", "block quantization"));
  const bool has_group = wr.present("group_size");
  std::string strategy =
      has_group && w["group_size"].is_number_integer() && w["group_size"].get<int64_t>() > 0 ? "group"
                                                                                             : "channel";
  SPK_ASSIGN(strategy, wr.string("strategy", strategy));
  if (strategy == "group") {
    SPK_ASSIGN(c.group_size, wr.integer("group_size", std::nullopt, 8));
    if (c.group_size % 8 != 0)
      return wr.bad("group_size", "must be a multiple of 8, got " + std::to_string(c.group_size));
  } else if (strategy == "channel") {
    if (has_group && !(w["group_size"].is_number_integer() && w["group_size"].get<int64_t>() == -1))
      return wr.bad("group_size",
                    "must be null or -1 with strategy \"channel\", got " + quoted(w["group_size"]));
    c.group_size = -1;
  } else {
    return not_built(wr, "strategy", "\"" + strategy + "\"");
  }
  if (wr.present("actorder")) {
    const nlohmann::json& a = w["actorder"];
    if (a.is_boolean()) {
      c.actorder = a.get<bool>() ? "group" : "";
    } else if (a.is_string()) {
      c.actorder = a.get<std::string>();
      if (c.actorder == "dynamic") c.actorder = "group";  // compressed-tensors' aliases
      if (c.actorder == "static") c.actorder = "weight";
      if (c.actorder != "group" && c.actorder != "weight")
        return wr.bad("actorder", "must be null, \"group\" or \"weight\", got " + quoted(a));
    } else {
      return wr.bad("actorder", "must be null, \"group\" or \"weight\", got " + quoted(a));
    }
    if (!c.actorder.empty() && strategy != "group")
      return wr.bad("actorder", "needs strategy \"group\", got strategy \"" + strategy + "\"");
  }
  c.desc_act = c.actorder == "group";  // "weight" reorders the columns while quantizing, stores no g_idx
  if (r.present("ignore")) {
    const nlohmann::json& m = q["ignore"];
    if (!m.is_array()) return r.bad("ignore", "must be a list of strings, got " + quoted(m));
    for (const auto& s : m) {
      if (!s.is_string()) return r.bad("ignore", "must be a list of strings, got " + quoted(m));
      const std::string e = s.get<std::string>();
      if (!e.starts_with("re:")) {
        c.modules_to_not_convert.push_back(e);
        continue;
      }
      try {
        std::regex re(e.substr(3));
      } catch (const std::regex_error& x) {
        return r.bad("ignore", "entry " + quoted(s) + " is not a regular expression this build reads (" +
                                   x.what() + ")");
      }
      c.ignore_regex.push_back(e.substr(3));
    }
  }
  return ok_status();
}

}  // namespace

bool QuantConfig::quantizes(const std::string& prefix) const {
  for (const std::string& m : modules_to_not_convert) {
    if (m.empty()) continue;
    if (prefix == m || prefix.starts_with(m + ".")) return false;
    if (prefix.size() > m.size() && prefix.ends_with(m) && prefix[prefix.size() - m.size() - 1] == '.')
      return false;
  }
  for (const std::string& re : ignore_regex)
    if (std::regex_search(prefix, std::regex(re), std::regex_constants::match_continuous)) return false;
  return true;
}

std::string QuantConfig::describe() const {
  return method + (format.empty() ? "" : " " + format) + " " + std::to_string(bits) + "-bit, group " +
         (group_size > 0 ? std::to_string(group_size) : std::string("-1 (one group)")) +
         (sym ? ", sym" : ", asym") +
         (method == "gptq" ? (desc_act ? ", desc_act" : "")
                           : (actorder.empty() ? "" : ", actorder " + actorder));
}

Result<QuantConfig> parse_quant_config(const nlohmann::json& q, const std::string& path) {
  const ConfigReader r{q, path, "quantization_config."};
  if (!q.is_object()) return r.bad("", "must be an object, got " + ConfigReader::dump(q));
  QuantConfig c;
  c.path = path;
  // quantize_config.json of AutoGPTQ exports has no quant_method: it is GPTQ.
  SPK_ASSIGN(c.method, r.string("quant_method", "gptq"));
  if (c.method == "compressed-tensors") {
    SPK_TRY(parse_compressed_tensors(r, c));
    return c;
  }
  if (c.method != "gptq") return not_built(r, "quant_method", "\"" + c.method + "\"");
  SPK_ASSIGN(c.bits, r.integer("bits", 4));
  if (c.bits != 4)
    return not_built(r, "bits", std::to_string(c.bits) + " (GPTQ " + std::to_string(c.bits) + "-bit)");
  if (r.present("group_size") && q["group_size"].is_number_integer() &&
      q["group_size"].get<int64_t>() == -1) {
    c.group_size = -1;
  } else {
    SPK_ASSIGN(c.group_size, r.integer("group_size", 128, 8));
    if (c.group_size % 8 != 0)
      return r.bad("group_size", "must be -1 or a multiple of 8, got " + std::to_string(c.group_size));
  }
  SPK_ASSIGN(c.sym, r.boolean("sym", true));
  SPK_ASSIGN(c.desc_act, r.boolean("desc_act", false));
  SPK_ASSIGN(std::string fmt, r.string("checkpoint_format", "gptq"));
  if (fmt != "gptq") return not_built(r, "checkpoint_format", "\"" + fmt + "\"");
  SPK_ASSIGN(bool lm_head, r.boolean("lm_head", false));
  if (lm_head) return not_built(r, "lm_head", "true (a quantized LM head)");
  if (r.present("dynamic") && !(q["dynamic"].is_object() && q["dynamic"].empty()))
    return not_built(r, "dynamic", ConfigReader::dump(q["dynamic"]) + " (per-module overrides)");
  if (r.present("modules_to_not_convert")) {
    const nlohmann::json& m = q["modules_to_not_convert"];
    if (!m.is_array())
      return r.bad("modules_to_not_convert", "must be a list of strings, got " + ConfigReader::dump(m));
    for (const auto& s : m) {
      if (!s.is_string())
        return r.bad("modules_to_not_convert", "must be a list of strings, got " + ConfigReader::dump(m));
      c.modules_to_not_convert.push_back(s.get<std::string>());
    }
  }
  return c;
}

Result<std::optional<QuantConfig>> find_quant_config(const nlohmann::json& config,
                                                     const std::string& config_path, const std::string& dir) {
  if (config.is_object() && config.contains("quantization_config") &&
      !config["quantization_config"].is_null()) {
    SPK_ASSIGN(QuantConfig q, parse_quant_config(config["quantization_config"], config_path));
    return std::optional<QuantConfig>(std::move(q));
  }
  if (dir.empty()) return std::optional<QuantConfig>();
  const std::string path = dir + "/quantize_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<QuantConfig>();
  SPK_ASSIGN(std::string text, read_file(path));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return make_error(path + ": not valid JSON: " + e.what(), "fix quantize_config.json or re-download it");
  }
  try {
    SPK_ASSIGN(QuantConfig q, parse_quant_config(j, path));
    return std::optional<QuantConfig>(std::move(q));
  } catch (const nlohmann::json::exception& e) {
    return make_error(path + ": unexpected value: " + e.what(), "fix quantize_config.json or re-download it");
  }
}

}  // namespace spk::rt
