// JSON as the CLI prints it (`--json` and every JSON line a verb writes). Strings in recipes, state files
// and node answers are user data and need not be UTF-8 (a Latin-1 recipe description); nlohmann's plain
// dump() throws type_error 316 on them, which would end the verb with `terminate called`. Here each
// invalid byte becomes U+FFFD instead, so the output stays valid JSON and the verb its exit code.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace spk::cli {

inline std::string json_text(const nlohmann::json& j, int indent = 2) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}
inline std::string json_text(const nlohmann::ordered_json& j, int indent = 2) {
  return j.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace spk::cli
