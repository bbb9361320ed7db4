#include "recipes/diagnostic.h"

#include <algorithm>

namespace spk {

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::error:
      return "error";
    case Severity::warning:
      return "warning";
    case Severity::not_honoured:
      return "not honoured by this build";
  }
  return "error";
}

std::string Diagnostic::str() const {
  std::string out = file;
  if (pos.line > 0) out += ":" + std::to_string(pos.line) + ":" + std::to_string(pos.column);
  out += ": ";
  if (severity != Severity::error) out += std::string(severity_name(severity)) + ": ";
  if (!key.empty()) out += key + ": ";
  out += message;
  if (!fix.empty()) out += " (" + fix + ")";
  return out;
}

bool has_errors(const std::vector<Diagnostic>& diags) { return count(diags, Severity::error) > 0; }

int count(const std::vector<Diagnostic>& diags, Severity s) {
  return static_cast<int>(
      std::count_if(diags.begin(), diags.end(), [s](const Diagnostic& d) { return d.severity == s; }));
}

}  // namespace spk
