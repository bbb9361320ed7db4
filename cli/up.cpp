// `sparkctl up LANE`, `restart`, `switch LANE` (orchestrator/deploy/up.h does the work). Progress per
// phase (and per node) with elapsed time on stdout; errors name the fix. Multi-node lanes also run the
// fabric gate, staging and the per-node fabric env (--fabric-setup, --skip-fabric, --skip-stage). Exit 0
// ready / already up, 1 failed.
#include "orchestrator/deploy/up.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/json_out.h"
#include "cli/verbs.h"

namespace spk::cli {
namespace {

struct UpCliOptions {
  UpOptions up;
  bool accept_new_host_key = false;
  bool no_drop_caches = false;
  bool no_supervise = false;
};

// Under --json the progress lines go to stderr and stdout gets one JSON object at the end.
DeployContext deploy_context(const Context& ctx, bool accept_new) {
  return DeployContext{ctx.global.state_dir, ctx.global.cluster_file, accept_new,
                       ctx.global.json ? &std::cerr : &std::cout};
}

void print_done(const Context& ctx, const char* verb, const std::string& outcome) {
  if (!ctx.global.json) return;
  nlohmann::json j{{"ok", true}, {"verb", verb}, {"outcome", outcome}};
  if (auto st = read_deploy_state(ctx.global.state_dir))
    j.update({{"lane", st->lane},
              {"phase", st->phase},
              {"endpoint", st->endpoint},
              {"api_key_file", st->api_key_file}});
  std::cout << json_text(j, -1) << "\n";
}

int run_up(Context& ctx, UpCliOptions o, const char* verb) {
  o.up.drop_caches = !o.no_drop_caches;
  o.up.supervise = !o.no_supervise;
  const DeployContext dc = deploy_context(ctx, o.accept_new_host_key);
  auto r = std::string(verb) == "switch" ? deploy_switch(dc, o.up) : deploy_up(dc, o.up);
  if (!r) {
    print_error(verb, r.error().what());
    return kExitFailed;
  }
  print_done(ctx, verb, *r == UpOutcome::already_up ? "already_up" : "started");
  return kExitOk;
}

void add_up_flags(CLI::App* sub, UpCliOptions& o) {
  sub->add_option("LANE", o.up.lane, "lane name (see `sparkctl recipe list`) or a recipe .yaml path")
      ->required();
  sub->add_flag("--accept-new-host-key", o.accept_new_host_key,
                "record unknown SSH host keys (printed); a changed key is always refused");
  sub->add_flag("--clean", o.up.clean,
                "kill stale sparkctl runtimes and remove leaked shm on every node first");
  sub->add_flag("--no-drop-caches", o.no_drop_caches, "do not drop the page cache before launch");
  sub->add_flag("--no-supervise", o.no_supervise, "do not start the supervisor daemon");
  sub->add_option("--ready-timeout", o.up.ready_timeout_s, "seconds rank 0 may take to answer a real token")
      ->check(CLI::PositiveNumber);
  sub->add_option("--shm-dir", o.up.shm_dir, "shared-memory directory checked and cleaned")
      ->envname("SPARKCTL_SHM_DIR");
  sub->add_flag(
      "--fabric-setup", o.up.fabric_setup,
      "multi-node: run `fabric setup` on every node first (root: fabric IP, MTU, link up; idempotent)");
  sub->add_flag("--skip-fabric", o.up.skip_fabric,
                "multi-node: no fabric gate (`fabric doctor` on every node) and no per-node fabric env");
  sub->add_flag("--skip-stage", o.up.skip_stage,
                "multi-node: do not stage the weights (preflight then checks them on every node)");
  sub->add_option("--stage-port", o.up.stage_port, "TCP port of stage-recv on each worker (fabric address)")
      ->envname("SPARKCTL_STAGE_PORT")
      ->check(CLI::Range(1, 65535));
}

}  // namespace

void setup_up(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<UpCliOptions>();
  auto* up = app.add_subcommand(
      "up",
      "preflight, fabric gate + stage + per-node fabric env (multi-node), launch workers first, wait for a "
      "real token, warm, ready");
  add_up_flags(up, *o);
  up->callback([&ctx, o] { ctx.exit_code = run_up(ctx, *o, "up"); });

  auto so = std::make_shared<UpCliOptions>();
  auto* sw = app.add_subcommand(
      "switch",
      "check the new lane, then stop every rank, clean, relaunch it fresh; roll back when it fails");
  add_up_flags(sw, *so);
  sw->callback([&ctx, so] { ctx.exit_code = run_up(ctx, *so, "switch"); });

  auto ro = std::make_shared<bool>(false);
  auto* re = app.add_subcommand("restart", "stop every rank and relaunch the same deployment worker-first");
  re->add_flag("--accept-new-host-key", *ro, "record unknown SSH host keys");
  re->callback([&ctx, ro] {
    if (Status s = deploy_restart(deploy_context(ctx, *ro)); !s.ok()) {
      print_error("restart", s.error().what());
      ctx.exit_code = kExitFailed;
      return;
    }
    print_done(ctx, "restart", "restarted");
    ctx.exit_code = kExitOk;
  });
}

}  // namespace spk::cli
