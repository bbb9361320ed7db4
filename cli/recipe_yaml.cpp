#include "cli/recipe_yaml.h"

#include <regex>

namespace spk::cli {
namespace {

using nlohmann::json;

// A string YAML 1.1/1.2 reads back as the same string without quotes.
bool plain_ok(const std::string& s) {
  static const std::regex safe(R"([A-Za-z_/][A-Za-z0-9_./-]*)");
  static const std::regex special(
      R"((?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF|null|Null|NULL))");
  return std::regex_match(s, safe) && !std::regex_match(s, special);
}

std::string scalar(const json& v) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    return plain_ok(s) ? s : v.dump();  // a JSON string is a valid YAML double-quoted scalar
  }
  return v.dump();  // numbers, booleans
}

std::string flow(const json& v) {
  if (v.is_object()) {
    std::string out = "{";
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it->is_null()) continue;
      out += (out.size() > 1 ? ", " : "") + it.key() + ": " + flow(*it);
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (const auto& e : v) out += (out.size() > 1 ? ", " : "") + flow(e);
    return out + "]";
  }
  return scalar(v);
}

void block(std::string& out, const json& obj, int indent) {
  const std::string pad(indent, ' ');
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const json& v = *it;
    if (v.is_null()) continue;
    if (v.is_object()) {
      if (v.empty()) continue;
      out += pad + it.key() + ":\n";
      block(out, v, indent + 2);
    } else if (v.is_array()) {
      if (v.empty()) continue;
      out += pad + it.key() + ":\n";
      for (const auto& e : v) out += pad + "  - " + flow(e) + "\n";
    } else {
      out += pad + it.key() + ": " + scalar(v) + "\n";
    }
  }
}

}  // namespace

std::string recipe_yaml(const json& j) {
  json r = j;
  r.erase("source");                                    // where it was read from, not a recipe key
  if (r.contains("model")) r["model"].erase("source");  // implied by hub | path | synthetic
  std::string out;
  block(out, r, 0);
  return out;
}

}  // namespace spk::cli
