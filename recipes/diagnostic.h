// One finding about an input file, with its position. Loaders collect all of them (not just the first)
// and callers print one per line: `lane-x.yaml:12:5: gpu_memory_utilization: 1.3 is out of range (0,1]
// (set a value like 0.90)`. Severity decides the exit code: any error = invalid.
#pragma once

#include <string>
#include <vector>

namespace spk {

enum class Severity {
  error,         // the file is invalid; `validate` exits 1
  warning,       // valid, but probably not what the user wants (an unpinned revision)
  not_honoured,  // valid, but this build cannot honour the setting yet (4-bit KV, EAGLE-3, ...)
};

const char* severity_name(Severity s);  // "error" | "warning" | "not honoured by this build"

struct SourcePos {
  int line = 0;    // 1-based; 0 = unknown (whole file)
  int column = 0;  // 1-based
};

struct Diagnostic {
  Severity severity = Severity::error;
  std::string file;  // as the user named it, or "lane-a.yaml" for an embedded recipe
  SourcePos pos;
  std::string key;  // dotted path: "model.revision", "nodes[1].fabric.ip"; may be empty
  std::string message;
  std::string fix;  // the knob that fixes it; may be empty

  // "file:line:col: key: message (fix)"; warnings and notes carry their severity after the position.
  [[nodiscard]] std::string str() const;
};

[[nodiscard]] bool has_errors(const std::vector<Diagnostic>& diags);
[[nodiscard]] int count(const std::vector<Diagnostic>& diags, Severity s);

}  // namespace spk
