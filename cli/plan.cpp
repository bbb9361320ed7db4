// `sparkctl plan LANE`: the ordered steps and the exact per-node argv/env that `up LANE` would run on
// the cluster (--cluster FILE or the implicit `local` one). Reads only; changes nothing. --json prints
// the Plan as one JSON document. Exit 1 when the recipe or the inventory is invalid or cannot fit.
// A multi-node lane's per-node fabric env is read from the nodes only with --fabric-env (read-only SSH);
// otherwise its fabric_env step says it is not read yet. The flags --fabric-setup, --skip-fabric and
// --skip-stage change the steps exactly as they change up's.
#include "orchestrator/plan.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/json_out.h"
#include "cli/lane_plan.h"
#include "cli/verbs.h"
#include "orchestrator/deploy/fabric_gate.h"
#include "orchestrator/deploy/memory_fit.h"
#include "orchestrator/deploy/node_links.h"
#include "orchestrator/deploy/stored_gmu.h"
#include "orchestrator/transport/local_exec.h"
#include "recipes/recipe_store.h"

namespace spk::cli {
namespace {

struct PlanCliOptions {
  std::string lane;
  PlanOptions plan;
  bool fabric_env = false;  // read every node's fabric env now, as up does after the gate
  bool accept_new_host_key = false;
};

// `--fabric-env`: each node's own NCCL/Gloo env through `node fabric-env` (read-only; the binary is not
// pushed, so the nodes must already run this build, as after `up`), applied exactly as `up` applies it.
Status read_fabric_envs(const PlanCliOptions& o, LanePlan& lp) {
  if (!runs_step(lp.plan, StepKind::fabric_env)) return ok_status();
  std::vector<std::string> names;
  for (int i = 0; i < lp.plan.nodes; ++i) names.push_back(lp.cluster.nodes[i].name);
  SPK_ASSIGN(auto links, link_nodes(lp.cluster, names, LinkOptions{o.accept_new_host_key, false}));
  SPK_ASSIGN(auto envs, fabric_envs(links, lp.recipe));
  for (const auto& line : apply_fabric_envs(lp.plan, envs)) lp.plan.notes.push_back("fabric env " + line);
  return ok_status();
}

int run_plan(Context& ctx, const PlanCliOptions& o) {
  // Errors and warnings go to stderr so that --json stdout stays one document; notes are in the plan.
  auto lp = load_lane_plan(ctx, o.lane, /*self_binary=*/false, o.plan);
  if (!lp) {
    print_error("plan", lp.error().what());
    return kExitFailed;
  }
  if (o.fabric_env)
    if (Status s = read_fabric_envs(o, *lp); !s.ok()) {
      print_error("plan", s.error().what());
      return kExitFailed;
    }
  // The stored GMU choice, applied exactly as `up` applies it (plan prints what up runs).
  if (auto note = apply_stored_gmu(ctx.global.state_dir, lp->recipe, lp->plan))
    lp->plan.notes.push_back(*note);
  const Plan* plan = &lp->plan;
  // Memory fit: the runtime's planner, dry, with each rank's argv, where the model is on this machine.
  auto self = self_executable();
  MemoryFit fit;
  if (self && plan->runnable())
    fit = check_memory_fit_here(*self, ctx.global.state_dir + "/plan", lp->recipe, *plan, lp->cluster);
  const std::vector<std::string>& argv0 = plan->ranks.front().process.argv;
  if (ctx.global.json) {
    nlohmann::json j = to_json(*plan);
    nlohmann::json fj = nlohmann::json::array();
    for (const auto& r : fit.ranks)
      fj.push_back({{"rank", r.rank},
                    {"node", r.node},
                    {"status", r.status},
                    {"detail", r.detail},
                    {"kv_tokens", r.kv_tokens}});
    j["memory_fit"] = fj;
    if (fit.refused()) {
      j["memory_knobs"] = memory_knobs(argv0);
      j["ok"] = false;  // one document: the refusal is in it, not in a second object
      j["error"] = o.lane + " does not fit in memory: `up` would refuse it (see memory_fit)";
    }
    std::cout << json_text(j) << "\n";
  } else {
    std::cout << to_text(*plan);
    if (!fit.ranks.empty()) std::cout << "\n  memory fit (runtime --dry-run-memory):\n" << fit.text(argv0);
  }
  if (fit.refused()) {
    if (!ctx.global.json)
      print_error("plan", o.lane + " does not fit in memory: `up` would refuse it (see memory fit above)");
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace

void setup_plan(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<PlanCliOptions>();
  auto* plan =
      app.add_subcommand("plan", "print the steps and per-node argv/env that up would run (changes nothing)");
  plan->add_option("LANE", o->lane, "lane name (see `sparkctl recipe list`) or a recipe .yaml path")
      ->required();
  plan->add_flag("--fabric-setup", o->plan.fabric_setup,
                 "as `up --fabric-setup`: fabric setup on every node");
  plan->add_flag("--skip-fabric", o->plan.skip_fabric, "as `up --skip-fabric`");
  plan->add_flag("--skip-stage", o->plan.skip_stage, "as `up --skip-stage`");
  plan->add_flag("--fabric-env", o->fabric_env,
                 "multi-node: read every node's own fabric env now (over SSH, read-only), so the ranks' env "
                 "is exactly what up launches");
  plan->add_flag("--accept-new-host-key", o->accept_new_host_key,
                 "with --fabric-env: record unknown host keys");
  plan->callback([&ctx, o] { ctx.exit_code = run_plan(ctx, *o); });
}

}  // namespace spk::cli
