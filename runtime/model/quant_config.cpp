#include "runtime/model/quant_config.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "kernels/base/fs.h"
#include "runtime/model/config_reader.h"

namespace spk::rt {
namespace {

constexpr const char* kBuilt =
    "this build loads quant_method \"gptq\" with bits 4 (checkpoint_format \"gptq\")";

Error not_built(const ConfigReader& r, const std::string& key, const std::string& value) {
  return make_error(r.path + ": key \"" + r.prefix + key + "\" is " + value + ": not built yet; " + kBuilt +
                        " (see issue 22)",
                    "use a GPTQ 4-bit or an unquantized (bf16/f16/f32) checkpoint of this model");
}

}  // namespace

bool QuantConfig::quantizes(const std::string& prefix) const {
  for (const std::string& m : modules_to_not_convert) {
    if (m.empty()) continue;
    if (prefix == m || prefix.starts_with(m + ".")) return false;
    if (prefix.size() > m.size() && prefix.ends_with(m) && prefix[prefix.size() - m.size() - 1] == '.')
      return false;
  }
  return true;
}

std::string QuantConfig::describe() const {
  return method + " " + std::to_string(bits) + "-bit, group " +
         (group_size > 0 ? std::to_string(group_size) : std::string("-1 (one group)")) +
         (sym ? ", sym" : ", asym") + (desc_act ? ", desc_act" : "");
}

Result<QuantConfig> parse_quant_config(const nlohmann::json& q, const std::string& path) {
  const ConfigReader r{q, path, "quantization_config."};
  if (!q.is_object()) return r.bad("", "must be an object, got " + ConfigReader::dump(q));
  QuantConfig c;
  c.path = path;
  // quantize_config.json of AutoGPTQ exports has no quant_method: it is GPTQ.
  SPK_ASSIGN(c.method, r.string("quant_method", "gptq"));
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
