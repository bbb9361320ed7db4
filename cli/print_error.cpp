// The one error line every verb prints: "sparkctl <verb>: <message> (<fix>)" on stderr; under --json
// also one JSON object on stdout, so a script reading stdout always gets a document, errors included.
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/context.h"
#include "cli/json_out.h"

namespace spk::cli {
namespace {
bool g_json = false;
}  // namespace

void set_json_errors(bool on) { g_json = on; }

void print_error(const std::string& verb, const std::string& what) {
  std::cerr << "sparkctl " << verb << ": " << what << "\n";
  if (g_json)
    std::cout << json_text(nlohmann::json{{"ok", false}, {"verb", verb}, {"error", what}}, -1) << "\n";
}

void print_error_plain(const std::string& what, bool json) {
  std::cerr << "sparkctl: " << what << "\n";
  if (json) std::cout << json_text(nlohmann::json{{"ok", false}, {"error", what}}, -1) << "\n";
}

}  // namespace spk::cli
