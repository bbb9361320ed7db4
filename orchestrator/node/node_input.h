// Strict reader for a node verb's JSON input: every key must be known and of the right type, else exit 2
// with the key named. Internal to orchestrator/node.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace spk::node_input {

using nlohmann::json;

inline Status only_keys(const json& in, const std::set<std::string>& allowed, const std::string& verb) {
  for (auto it = in.begin(); it != in.end(); ++it)
    if (!allowed.count(it.key())) {
      std::string list;
      for (const auto& k : allowed) list += (list.empty() ? "" : ", ") + k;
      return make_error("node " + verb + ": unknown input key '" + it.key() + "'",
                        "known keys: " + (list.empty() ? std::string("none") : list));
    }
  return ok_status();
}

inline Result<std::string> str(const json& in, const char* key, std::string def) {
  if (!in.contains(key)) return def;
  if (!in[key].is_string())
    return make_error(std::string("input '") + key + "' must be a string", "fix the caller");
  return in[key].get<std::string>();
}

inline Result<uint64_t> u64(const json& in, const char* key, uint64_t def) {
  if (!in.contains(key)) return def;
  // In-process callers build JSON with signed ints; parsed JSON has unsigned ones: accept both when >= 0.
  if (!in[key].is_number_integer() || (!in[key].is_number_unsigned() && in[key].get<int64_t>() < 0))
    return make_error(std::string("input '") + key + "' must be a non-negative integer", "fix the caller");
  return in[key].get<uint64_t>();
}

inline Result<bool> boolean(const json& in, const char* key, bool def) {
  if (!in.contains(key)) return def;
  if (!in[key].is_boolean())
    return make_error(std::string("input '") + key + "' must be true/false", "fix the caller");
  return in[key].get<bool>();
}

inline Result<std::vector<std::string>> strings(const json& in, const char* key,
                                                std::vector<std::string> def) {
  if (!in.contains(key)) return def;
  std::vector<std::string> out;
  if (!in[key].is_array())
    return make_error(std::string("input '") + key + "' must be a list of strings", "fix the caller");
  for (const auto& v : in[key]) {
    if (!v.is_string())
      return make_error(std::string("input '") + key + "' must be a list of strings", "fix the caller");
    out.push_back(v.get<std::string>());
  }
  return out;
}

inline Result<std::vector<int>> ports(const json& in, const char* key) {
  std::vector<int> out;
  if (!in.contains(key)) return out;
  if (!in[key].is_array())
    return make_error(std::string("input '") + key + "' must be a list of ports", "fix the caller");
  for (const auto& v : in[key]) {
    if (!v.is_number_integer() || v.get<long>() < 1 || v.get<long>() > 65535)
      return make_error(std::string("input '") + key + "' has a bad port " + v.dump(), "ports are 1..65535");
    out.push_back(v.get<int>());
  }
  return out;
}

}  // namespace spk::node_input
