// `sparkctl stage LANE [--verify] [--hash]`: the lane's checkpoint complete on every node it uses
// (orchestrator/staging/stage.h). The head gets its copy first, then each worker receives the head's
// tree over the fabric and is verified. --verify only reports. Exit 1 when any node is incomplete. A push
// skips files whose size and mtime match unless --hash.
#include "orchestrator/staging/stage.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <set>

#include "cli/json_out.h"
#include "cli/lane_plan.h"
#include "cli/verbs.h"
#include "orchestrator/plan.h"
#include "orchestrator/staging/push/file_io.h"
#include "orchestrator/transport/binary_push.h"
#include "orchestrator/transport/local_exec.h"
#include "orchestrator/transport/ssh_exec.h"
#include "recipes/recipe_store.h"

namespace spk::cli {
namespace {

struct StageCliOptions {
  std::string lane;
  bool accept_new_host_key = false;
  staging::StageOptions stage;
};

int fail(const std::string& what) {
  print_error("stage", what);
  return kExitFailed;
}

// One stderr line per node, rewritten in place on a terminal: "node-b  1.20 GiB / 4.00 GiB  850 MB/s  ETA 3
// s".
void print_progress(const std::string& node, const staging::PushProgress& p) {
  static std::mutex mu;
  std::lock_guard<std::mutex> l(mu);
  const bool tty = ::isatty(2);
  static int calls = 0;
  static std::set<std::string> finished;
  bool last = p.bytes_sent >= p.bytes_total;
  if (last && !finished.insert(node).second) return;  // the final line once per node
  if (!tty && !last && (++calls % 50) != 0) return;   // logs: every ~5 s and at the end
  char line[256];
  std::snprintf(line, sizeof(line), "%s  %s / %s  %.0f MB/s  ETA %.0f s", node.c_str(),
                staging::human_bytes(p.bytes_sent).c_str(), staging::human_bytes(p.bytes_total).c_str(),
                p.rate_bytes_per_s / 1e6, p.eta_s);
  std::cerr << (tty ? "\r" : "") << "stage: " << line << (tty && !last ? "\033[K" : "\n") << std::flush;
}

int run_stage(Context& ctx, StageCliOptions o) {
  auto lp = load_lane_plan(ctx, o.lane, /*self_binary=*/true);
  if (!lp) return fail(lp.error().what());
  const Recipe& recipe = lp->recipe;
  const Plan* plan = &lp->plan;
  const Cluster* cluster = &lp->cluster;

  staging::StageOptions so = o.stage;
  so.log_dir = ctx.global.state_dir + "/stage/" + recipe.name;
  so.exec_for = [self = lp->self,
                 accept_new = o.accept_new_host_key](const Node& n) -> Result<std::unique_ptr<RemoteExec>> {
    if (n.local)
      return std::unique_ptr<RemoteExec>(std::make_unique<LocalExec>(LocalTarget{n.name, self, {}, {}}));
    SshTarget t = ssh_target(n);
    t.accept_new_host_key = accept_new;
    auto ssh = std::make_unique<SshExec>(t);
    // stage-recv must be this build's: push the head's binary when the node's copy differs.
    SPK_TRY(ensure_node_binary(*ssh, self));
    return std::unique_ptr<RemoteExec>(std::move(ssh));
  };
  so.progress = print_progress;
  auto rep = staging::stage_lane(recipe, *cluster, *plan, so);
  if (!rep) return fail(rep.error().what());
  if (ctx.global.json)
    std::cout << json_text(rep->to_json()) << "\n";
  else
    std::cout << rep->to_text();
  return rep->ok() ? kExitOk : kExitFailed;
}

}  // namespace

void setup_stage(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<StageCliOptions>();
  auto* s = app.add_subcommand("stage",
                               "make the lane's weights complete on every node: head first, then push "
                               "to workers over the fabric, verify");
  s->add_option("LANE", o->lane, "lane name or recipe .yaml path")->required();
  s->add_flag("--verify", o->stage.verify_only, "only report completeness per node; change nothing");
  s->add_flag(
      "--hash", o->stage.hash,
      "with --verify: compare every worker file's XXH3 with the head's, and hub blobs with their SHA-256; "
      "without: hash every block on both ends instead of skipping files whose size and mtime match (only "
      "this finds a corruption that kept both)");
  s->add_option("--port", o->stage.port, "TCP port of stage-recv on each worker (fabric address)")
      ->envname("SPARKCTL_STAGE_PORT")
      ->check(CLI::Range(1, 65535));
  s->add_flag("--accept-new-host-key", o->accept_new_host_key,
              "record unknown SSH host keys of workers (a changed key is always refused)");
  s->add_option("--streams", o->stage.streams, "parallel TCP streams per worker")->check(CLI::Range(1, 64));
  s->callback([&ctx, o] { ctx.exit_code = run_stage(ctx, *o); });
}

}  // namespace spk::cli
