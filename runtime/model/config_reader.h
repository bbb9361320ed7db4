// Typed reads of one JSON object of config.json (the top level, a text_config, rope_parameters) that name
// the file and the full key on every error. Shared by the config parsers of each architecture family.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "kernels/base/status.h"

namespace spk::rt {

struct ConfigReader {
  const nlohmann::json& j;
  const std::string& path;
  std::string prefix;  // "text_config." / "rope_parameters." for nested objects

  [[nodiscard]] ConfigReader sub(const nlohmann::json& obj, const std::string& key) const {
    return ConfigReader{obj, path, prefix + key + "."};
  }
  [[nodiscard]] Error bad(const std::string& key, const std::string& what) const {
    return make_error(path + ": key \"" + prefix + key + "\" " + what,
                      "fix config.json or regenerate the checkpoint");
  }
  [[nodiscard]] bool present(const char* key) const { return j.contains(key) && !j[key].is_null(); }

  // Integer >= min; required when `def` is empty.
  [[nodiscard]] Result<int> integer(const char* key, std::optional<int> def = {}, int min = 1) const {
    if (!present(key)) {
      if (def) return *def;
      return bad(key, "is missing");
    }
    const nlohmann::json& v = j[key];
    if (!v.is_number_integer()) return bad(key, "must be an integer, got " + dump(v));
    const bool too_big =
        v.is_number_unsigned() ? v.get<uint64_t>() > INT32_MAX : v.get<int64_t>() > INT32_MAX;
    if (too_big || v.get<int64_t>() < min)
      return bad(key, "must be an integer >= " + std::to_string(min) + ", got " + dump(v));
    const auto x = v.get<int64_t>();
    return static_cast<int>(x);
  }
  // Number > 0 (or >= 0 when allow_zero).
  [[nodiscard]] Result<double> number(const char* key, double def, bool allow_zero = false) const {
    if (!present(key)) return def;
    const nlohmann::json& v = j[key];
    if (!v.is_number()) return bad(key, "must be a number, got " + dump(v));
    const double x = v.get<double>();
    if (!(allow_zero ? x >= 0 : x > 0))
      return bad(key, std::string("must be ") + (allow_zero ? ">= 0" : "> 0") + ", got " + dump(v));
    return x;
  }
  [[nodiscard]] Result<bool> boolean(const char* key, bool def) const {
    if (!present(key)) return def;
    if (!j[key].is_boolean()) return bad(key, "must be true or false, got " + dump(j[key]));
    return j[key].get<bool>();
  }
  [[nodiscard]] Result<std::string> string(const char* key, const std::string& def) const {
    if (!present(key)) return def;
    if (!j[key].is_string()) return bad(key, "must be a string, got " + dump(j[key]));
    return j[key].get<std::string>();
  }

  // A JSON value for an error message: never throws on invalid UTF-8, cut to 200 bytes.
  static std::string dump(const nlohmann::json& v) {
    std::string s = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (s.size() > 200) s = s.substr(0, 200) + "...";
    return s;
  }
};

}  // namespace spk::rt
