// What every verb gets: the global options and the exit code it sets. Declared once in main.cpp.
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace spk::cli {

struct GlobalOptions {
  std::string cluster_file;  // --cluster / SPARKCTL_CLUSTER; empty = the implicit one-node `local` cluster
  std::string state_dir;     // --state-dir / SPARKCTL_STATE_DIR; default ~/.local/state/sparkctl
  std::string log_level = "info";
  bool json = false;  // --json: machine-readable output on stdout
};

struct Context {
  GlobalOptions global;
  int exit_code = 0;  // set by the verb that ran: 0 ok, 1 failed check/validation, 2 usage
};

// Exit codes shared by all verbs.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

// Prints an error line "sparkctl <verb>: <message> (<fix>)" to stderr. Under --json it also prints one
// JSON object on stdout: {"ok": false, "verb": V, "error": "<message> (<fix>)"}.
void print_error(const std::string& verb, const std::string& what);
// The same without a verb ("sparkctl: <what>"), for errors before any verb runs (usage, unknown verb).
void print_error_plain(const std::string& what, bool json);
// Set once by main.cpp from --json.
void set_json_errors(bool on);

}  // namespace spk::cli
