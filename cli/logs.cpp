// `sparkctl logs [-f] [--node N] [--bytes B]`: the rank logs of every node of the deployment, each line
// prefixed "[node/rank-R] "; -f keeps polling (every 500 ms) and prints new lines as they arrive,
// interleaved across nodes, until interrupted.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

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
};

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
  while (true) {
    for (auto& l : *links) {
      if (!o.node.empty() && l.node.name != o.node) continue;
      auto text = read_new_log_lines(l, spec->run_dir(l.node.name), offsets[l.node.name], first, o.bytes);
      if (!text) {
        print_error("logs", text.error().what());
        if (!o.follow) return kExitFailed;
        continue;
      }
      std::cout << *text << std::flush;
    }
    first = false;
    if (!o.follow) return kExitOk;
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
  lg->callback([&ctx, o] { ctx.exit_code = run_logs(ctx, *o); });
}

}  // namespace spk::cli
