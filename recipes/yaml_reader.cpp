#include "recipes/yaml_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>

#include "recipes/input_text.h"

namespace spk {

int edit_distance(std::string_view a, std::string_view b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest(std::string_view word, std::span<const std::string_view> candidates) {
  // A typo is plausible within max(2, len/3) edits: "max_model_length" -> "max_model_len" is 3 of 16.
  int limit = std::max<int>(2, static_cast<int>(word.size()) / 3);
  std::string best;
  int best_d = limit + 1;
  for (auto c : candidates) {
    int d = edit_distance(word, c);
    if (d < best_d) {
      best_d = d;
      best = std::string(c);
    }
  }
  return best;
}

SourcePos YamlReader::pos(const YAML::Node& n) {
  if (!n.IsDefined()) return {};
  YAML::Mark m = n.Mark();
  if (m.line < 0) return {};
  return {m.line + 1, m.column + 1};
}

std::string YamlReader::join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

void YamlReader::add(Severity s, SourcePos p, std::string key, std::string message, std::string fix) {
  out_.push_back(Diagnostic{s, file_, p, std::move(key), std::move(message), std::move(fix)});
}

bool YamlReader::walk(const YAML::Node& n, int depth, int& nodes, const YamlLimits& limits) {
  if (++nodes > limits.max_nodes) {
    add(Severity::error, pos(n), "", "more than " + std::to_string(limits.max_nodes) + " YAML nodes",
        "a recipe or inventory is small; remove repeated or aliased content");
    return false;
  }
  if (n.IsMap() || n.IsSequence()) {
    if (depth >= limits.max_depth) {
      add(Severity::error, pos(n), "", "nesting deeper than " + std::to_string(limits.max_depth) + " levels",
          "flatten the document");
      return false;
    }
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (n.IsMap()) {
        if (!walk(it->first, depth + 1, nodes, limits) || !walk(it->second, depth + 1, nodes, limits))
          return false;
      } else if (!walk(*it, depth + 1, nodes, limits)) {
        return false;
      }
    }
  }
  return true;
}

std::optional<YAML::Node> YamlReader::parse(std::string_view text, const YamlLimits& limits) {
  if (text.size() > limits.max_bytes) {
    add(Severity::error, {}, "",
        "file is " + std::to_string(text.size()) + " bytes, more than the cap of " +
            std::to_string(limits.max_bytes),
        "a recipe or inventory is a few KiB; check that this is the right file");
    return std::nullopt;
  }
  // yaml-cpp passes ill-formed UTF-8 through into scalars and error messages, and from there into
  // JSON output; refuse it here, at its position.
  if (auto bad = find_invalid_utf8(text)) {
    add(Severity::error, bad->pos, "", "invalid UTF-8: " + bad->what,
        "save the file as UTF-8 (recipes and inventories are UTF-8 text)");
    return std::nullopt;
  }
  if (auto bad = find_control_char(text)) {
    add(Severity::error, bad->pos, "", bad->what + " in YAML text", "remove it (is this a binary file?)");
    return std::nullopt;
  }
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    SourcePos p{};
    if (e.mark.line >= 0) p = {e.mark.line + 1, e.mark.column + 1};
    add(Severity::error, p, "", "YAML syntax: " + e.msg, "fix the syntax at this position");
    return std::nullopt;
  }
  int nodes = 0;
  if (!walk(root, 0, nodes, limits)) return std::nullopt;
  return root;
}

YAML::Node YamlReader::find(const YAML::Node& map, std::string_view key) {
  if (map.IsMap()) {
    for (auto it = map.begin(); it != map.end(); ++it)
      if (it->first.IsScalar() && it->first.Scalar() == key) return it->second;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

bool YamlReader::map(const YAML::Node& n, const std::string& path,
                     std::span<const std::string_view> allowed) {
  if (!n.IsMap()) {
    error(n, path, "expected a map of keys, got " + std::string(n.IsSequence() ? "a list" : "a scalar"),
          "write `key: value` lines here");
    return false;
  }
  std::set<std::string> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    const YAML::Node k = it->first;  // a copy: it->first lives in a temporary (yaml-cpp proxy)
    if (!k.IsScalar()) {
      error(k, path, "keys must be plain words", "use one of the documented keys");
      continue;
    }
    const std::string& name = k.Scalar();
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      std::string near = closest(name, allowed);
      std::string msg = "unknown key '" + name + "'";
      if (!near.empty()) msg += " (did you mean '" + near + "'?)";
      std::string keys;
      for (auto a : allowed) keys += (keys.empty() ? "" : ", ") + std::string(a);
      add(Severity::error, pos(k), path, msg, near.empty() ? "known keys: " + keys : "");
      continue;
    }
    if (!seen.insert(name).second) error(k, join(path, name), "duplicate key", "keep one of the two entries");
  }
  return true;
}

namespace {

std::string describe(const YAML::Node& v) {
  if (v.IsMap()) return "a map";
  if (v.IsSequence()) return "a list";
  return "'" + v.Scalar() + "'";
}

bool plain(const YAML::Node& v) { return v.IsScalar() && v.Tag() != "!"; }

}  // namespace

std::optional<std::string> YamlReader::str(const YAML::Node& map, std::string_view key,
                                           const std::string& path) {
  YAML::Node v = find(map, key);
  if (!v.IsDefined() || v.IsNull()) return std::nullopt;
  if (!v.IsScalar()) {
    error(v, join(path, key), "expected a string, got " + describe(v), "write a single value");
    return std::nullopt;
  }
  return v.Scalar();
}

std::optional<int64_t> YamlReader::integer(const YAML::Node& map, std::string_view key,
                                           const std::string& path) {
  YAML::Node v = find(map, key);
  if (!v.IsDefined() || v.IsNull()) return std::nullopt;
  int64_t out = 0;
  if (plain(v)) {
    const std::string& s = v.Scalar();
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    if (ec == std::errc() && p == s.data() + s.size()) return out;
  }
  error(v, join(path, key), "expected an integer, got " + describe(v), "write a whole number without quotes");
  return std::nullopt;
}

std::optional<double> YamlReader::number(const YAML::Node& map, std::string_view key,
                                         const std::string& path) {
  YAML::Node v = find(map, key);
  if (!v.IsDefined() || v.IsNull()) return std::nullopt;
  if (plain(v)) {
    const std::string& s = v.Scalar();
    char* end = nullptr;
    double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d)) return d;
  }
  error(v, join(path, key), "expected a number, got " + describe(v),
        "write a number like 0.90 without quotes");
  return std::nullopt;
}

std::optional<bool> YamlReader::boolean(const YAML::Node& map, std::string_view key,
                                        const std::string& path) {
  YAML::Node v = find(map, key);
  if (!v.IsDefined() || v.IsNull()) return std::nullopt;
  if (plain(v) && (v.Scalar() == "true" || v.Scalar() == "false")) return v.Scalar() == "true";
  error(v, join(path, key), "expected true or false, got " + describe(v), "write true or false");
  return std::nullopt;
}

std::optional<std::vector<std::string>> YamlReader::str_list(const YAML::Node& map, std::string_view key,
                                                             const std::string& path) {
  YAML::Node v = find(map, key);
  if (!v.IsDefined() || v.IsNull()) return std::nullopt;
  if (!v.IsSequence()) {
    error(v, join(path, key), "expected a list, got " + describe(v), "write [a, b]");
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].IsScalar()) {
      error(v[i], join(path, key) + "[" + std::to_string(i) + "]", "expected a string, got " + describe(v[i]),
            "list plain values");
      return std::nullopt;
    }
    out.push_back(v[i].Scalar());
  }
  return out;
}

std::optional<std::vector<std::pair<std::string, std::string>>> YamlReader::str_map(const YAML::Node& map,
                                                                                    std::string_view key,
                                                                                    const std::string& path) {
  YAML::Node v = find(map, key);
  if (!v.IsDefined() || v.IsNull()) return std::nullopt;
  if (!v.IsMap()) {
    error(v, join(path, key), "expected a map, got " + describe(v), "write `NAME: value` lines");
    return std::nullopt;
  }
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::string> seen;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it->first.IsScalar() || !(it->second.IsScalar() || it->second.IsNull())) {
      error(it->first, join(path, key), "expected `NAME: scalar`, got " + describe(it->second),
            "values here are single strings or numbers");
      continue;
    }
    std::string k = it->first.Scalar();
    if (!seen.insert(k).second) {
      error(it->first, join(join(path, key), k), "duplicate key", "keep one of the two entries");
      continue;
    }
    out.emplace_back(k, it->second.IsNull() ? std::string() : it->second.Scalar());
  }
  return out;
}

std::optional<int64_t> YamlReader::integer_in(const YAML::Node& map, std::string_view key,
                                              const std::string& path, int64_t lo, int64_t hi,
                                              const std::string& fix) {
  auto v = integer(map, key, path);
  if (v && (*v < lo || *v > hi)) {
    error(find(map, key), join(path, key),
          std::to_string(*v) + " is out of range [" + std::to_string(lo) + "," + std::to_string(hi) + "]",
          fix);
    return std::nullopt;
  }
  return v;
}

}  // namespace spk
