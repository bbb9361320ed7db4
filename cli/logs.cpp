// `sparkctl logs [-f] [-n N] [--all-runs] [--node N] [--bytes B]`: the rank logs of every node of the
// deployment, each line prefixed "[node/rank-R] "; by default only the current run of each log (from its
// last "== sparkctl node launch" header: logs are appended across launches), -n the last N lines of each;
// -f keeps polling (every 500 ms) and prints new lines as they arrive, interleaved across nodes, until
// interrupted. --json (without -f): {"ok": true, "lines": [...]}.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "cli/json_out.h"
#include "cli/verbs.h"
#include "orchestrator/deploy/lifecycle.h"
#include "orchestrator/deploy/rank_ops.h"

namespace spk::cli {
namespace {

std::atomic<bool> g_logs_stop{false};
void on_int(int) { g_logs_stop = true; }

struct LogsCliOptions {
  bool follow = false;
  std::string node;
  size_t bytes = 8192;
  size_t tail = 0;  // -n: last N lines of each log; 0 = all of the window
  bool all_runs = false;
};

// Lines "[node/name] text" grouped per log (first-seen order); of each group only the current run
// (from the last launch header) unless all_runs, and only the last `tail` lines when tail > 0.
std::vector<std::string> select_lines(const std::string& text, bool all_runs, size_t tail) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<std::string>> groups;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    std::string line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    at = nl == std::string::npos ? text.size() : nl + 1;
    const size_t close = line.find("] ");
    const std::string key =
        line.rfind('[', 0) == 0 && close != std::string::npos ? line.substr(0, close + 1) : "";
    if (!groups.count(key)) order.push_back(key);
    auto& g = groups[key];
    if (!all_runs && close != std::string::npos &&
        line.compare(close + 2, 24, "== sparkctl node launch ") == 0)
      g.clear();  // an earlier run of this log: not shown by default
    g.push_back(line);
  }
  std::vector<std::string> out;
  for (const auto& k : order) {
    const auto& g = groups[k];
    size_t from = tail > 0 && g.size() > tail ? g.size() - tail : 0;
    out.insert(out.end(), g.begin() + static_cast<long>(from), g.end());
  }
  return out;
}

int run_logs(Context& ctx, const LogsCliOptions& o) {
  auto spec = read_deploy_spec(ctx.global.state_dir);
  if (!spec) {
    print_error("logs", spec.error().what());
    return kExitFailed;
  }
  if (!o.node.empty() && spec->run_dir(o.node).empty()) {
    std::string known;
    for (const auto& n : spec->nodes()) known += (known.empty() ? "" : ", ") + n;
    print_error("logs", "--node " + o.node + " is not a node of the deployment (nodes: " + known + ")");
    return kExitUsage;
  }
  DeployContext dc{ctx.global.state_dir, spec->cluster_file, false, nullptr};
  auto links = link_spec_nodes(dc, *spec, false);
  if (!links) {
    print_error("logs", links.error().what());
    return kExitFailed;
  }
  std::map<std::string, std::map<std::string, uint64_t>> offsets;  // node -> log -> offset
  struct sigaction sa {};
  sa.sa_handler = on_int;
  if (o.follow) ::sigaction(SIGINT, &sa, nullptr), ::sigaction(SIGTERM, &sa, nullptr);
  bool first = true;
  std::vector<std::string> lines;  // --json
  // -n N wants N lines of each log: read a window wide enough for them.
  const size_t window = std::min<size_t>(std::max<size_t>(o.bytes, o.tail * 512), 1 << 20);
  while (true) {
    for (auto& l : *links) {
      if (!o.node.empty() && l.node.name != o.node) continue;
      auto text = read_new_log_lines(l, spec->run_dir(l.node.name), offsets[l.node.name], first, window);
      if (!text) {
        print_error("logs", text.error().what());
        if (!o.follow) return kExitFailed;
        continue;
      }
      if (!first) {
        std::cout << *text << std::flush;
        continue;
      }
      for (const auto& line : select_lines(*text, o.all_runs, o.tail)) {
        if (ctx.global.json && !o.follow)
          lines.push_back(line);
        else
          std::cout << line << "\n";
      }
      std::cout << std::flush;
    }
    first = false;
    if (!o.follow) {
      if (ctx.global.json) std::cout << json_text(nlohmann::json{{"ok", true}, {"lines", lines}}, -1) << "\n";
      return kExitOk;
    }
    for (int i = 0; i < 10 && !g_logs_stop; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (g_logs_stop) return kExitOk;
  }
}

}  // namespace

void setup_logs(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<LogsCliOptions>();
  auto* lg = app.add_subcommand("logs", "rank logs of every node, interleaved with node prefixes");
  lg->add_flag("-f,--follow", o->follow, "keep printing new lines until interrupted");
  lg->add_option("--node", o->node, "only this node");
  lg->add_option("--bytes", o->bytes, "tail bytes per log first shown")->check(CLI::Range(1, 1 << 20));
  lg->add_option("-n,--tail", o->tail, "only the last N lines of each log")->check(CLI::Range(1, 100000));
  lg->add_flag("--all-runs", o->all_runs, "also earlier runs of each log (default: the current run only)");
  lg->callback([&ctx, o] { ctx.exit_code = run_logs(ctx, *o); });
}

}  // namespace spk::cli
