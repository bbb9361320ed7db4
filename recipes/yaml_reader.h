// Typed, position-aware reading of a YAML document into structs, for every loader of user YAML
// (recipes, cluster inventory). Every problem becomes a Diagnostic with file:line:column and the
// dotted key; reading goes on after an error so that all problems are reported in one pass.
// Input caps (bytes, flow nesting, tree depth, node count incl. alias expansion) bound the work done
// on hostile input: 1 MiB and 4096 nodes parse in well under a millisecond per KiB.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "recipes/diagnostic.h"

namespace spk {

struct YamlLimits {
  size_t max_bytes = 1u << 20;  // 1 MiB: a recipe is ~2 KiB
  int max_depth = 16;           // maps/sequences nested deeper than this are refused
  int max_nodes = 4096;         // scalars + collections, counting every alias expansion
};

// Edit distance, for "did you mean" suggestions.
int edit_distance(std::string_view a, std::string_view b);
// The closest candidate when it is close enough to be a plausible typo, else "".
std::string closest(std::string_view word, std::span<const std::string_view> candidates);

class YamlReader {
 public:
  YamlReader(std::string file, std::vector<Diagnostic>& out) : file_(std::move(file)), out_(out) {}

  // Parses `text` under `limits`. On failure records an error and returns nullopt.
  std::optional<YAML::Node> parse(std::string_view text, const YamlLimits& limits = {});

  static SourcePos pos(const YAML::Node& n);
  static std::string join(const std::string& path, std::string_view key);

  void add(Severity s, SourcePos p, std::string key, std::string message, std::string fix = {});
  void error(const YAML::Node& at, std::string key, std::string message, std::string fix = {}) {
    add(Severity::error, pos(at), std::move(key), std::move(message), std::move(fix));
  }

  // Checks that `n` is a map whose keys are unique scalars from `allowed`; unknown keys get a
  // "did you mean". Returns false (after an error) when `n` is not a map.
  bool map(const YAML::Node& n, const std::string& path, std::span<const std::string_view> allowed);

  // The value under `key` (first occurrence), or an undefined node when absent.
  static YAML::Node find(const YAML::Node& map, std::string_view key);

  // Typed readers. Absent or null (`key:` with no value) gives nullopt and no error; a value of the
  // wrong type gives an error naming the value and nullopt. `path` is the map's own dotted path.
  std::optional<std::string> str(const YAML::Node& map, std::string_view key, const std::string& path);
  std::optional<int64_t> integer(const YAML::Node& map, std::string_view key, const std::string& path);
  std::optional<double> number(const YAML::Node& map, std::string_view key, const std::string& path);
  std::optional<bool> boolean(const YAML::Node& map, std::string_view key, const std::string& path);
  std::optional<std::vector<std::string>> str_list(const YAML::Node& map, std::string_view key,
                                                   const std::string& path);
  // A map of scalar values, in file order; values keep their text ("9000", "true").
  std::optional<std::vector<std::pair<std::string, std::string>>> str_map(const YAML::Node& map,
                                                                          std::string_view key,
                                                                          const std::string& path);

  // Integer range check with the standard message: "<v> is out of range [lo,hi] (fix)".
  std::optional<int64_t> integer_in(const YAML::Node& map, std::string_view key, const std::string& path,
                                    int64_t lo, int64_t hi, const std::string& fix);

  const std::string& file() const { return file_; }

 private:
  bool walk(const YAML::Node& n, int depth, int& nodes, const YamlLimits& limits);

  std::string file_;
  std::vector<Diagnostic>& out_;
};

}  // namespace spk
