// `sparkctl gmu bisect LANE`: the gpu-memory-utilization window where the lane's runtime boots and its
// KV pool holds the target (orchestrator/gmu/gmu_bisect.h). Analytic from the runtime's
// --dry-run-memory, confirmed by real boots of the plan's rank-0 argv, climbing from below.
// --write stores the choice for `up` (<state-dir>/gmu/<lane>.json). Exit 1 when no G qualifies.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/json_out.h"
#include "cli/lane_plan.h"
#include "cli/verbs.h"
#include "orchestrator/gmu/gmu_bisect.h"
#include "orchestrator/gmu/gmu_store.h"
#include "orchestrator/gmu/process_probe.h"
#include "orchestrator/plan.h"
#include "orchestrator/transport/local_exec.h"
#include "recipes/recipe_store.h"

namespace spk::cli {
namespace {

struct GmuCliOptions {
  std::string lane;
  BisectOptions bisect;
  int concurrency = 1;
  double mem_floor_gib = 8.0;
  bool no_boot = false;
  bool write = false;
  int boot_timeout_s = 600;
};

int fail(const std::string& what) {
  print_error("gmu bisect", what);
  return kExitFailed;
}

int run_gmu_bisect(Context& ctx, GmuCliOptions o) {
  auto lp = load_lane_plan(ctx, o.lane, /*self_binary=*/true);
  if (!lp) return fail(lp.error().what());
  const Recipe& recipe = lp->recipe;
  const Plan* plan = &lp->plan;
  const Cluster* cluster = &lp->cluster;
  if (!plan->runnable())
    return fail(o.lane + " has settings this build cannot honour (see `sparkctl plan " + o.lane + "`)");
  if (plan->ranks.size() != 1 || !cluster->is_local())
    return fail("bisecting a multi-node or remote lane is not built yet (" +
                std::to_string(plan->ranks.size()) + " ranks on " + cluster->name +
                "); run it on a one-node local lane");

  const std::string dir = ctx.global.state_dir + "/gmu/" + recipe.name;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail("cannot create " + dir + ": " + ec.message() + " (check --state-dir)");
  // The synthetic checkpoint must exist before the runtime can plan: run the plan's own step.
  for (const auto& st : plan->steps)
    if (st.kind == StepKind::synth_model)
      for (const auto& c : st.commands) {
        const auto& a = c.argv;
        auto out = std::find(a.begin(), a.end(), "--out");
        if (out != a.end() && out + 1 != a.end() && std::filesystem::exists(*(out + 1) + "/config.json"))
          continue;
        if (Status s = run_logged(a, dir + "/synth-model.log"); !s.ok()) return fail(s.error().what());
      }

  ProcessProbeOptions ppo;
  ppo.argv = plan->ranks[0].process.argv;
  ppo.log_dir = dir;
  ppo.boot_timeout = std::chrono::seconds(o.boot_timeout_s);
  ProcessProbe probe(ppo);
  BisectOptions b = o.bisect;
  b.confirm = !o.no_boot;
  b.apply_floor = o.mem_floor_gib > 0;
  b.mem_floor_bytes = static_cast<uint64_t>(o.mem_floor_gib * 1024.0 * 1024.0 * 1024.0);
  if (b.kv_target <= 0) b.kv_target = static_cast<int64_t>(recipe.max_model_len) * o.concurrency;

  auto rep = bisect_gmu(probe, b);
  if (!rep) return fail(rep.error().what());
  if (ctx.global.json)
    std::cout << json_text(rep->to_json()) << "\n";
  else
    std::cout << rep->to_table();
  if (o.write) {
    GmuChoice c;
    c.lane = recipe.name;
    const auto& m = recipe.model;
    c.model_revision = m.source == ModelSource::synthetic
                           ? "synthetic:" + m.synthetic.arch + "/" + m.synthetic.preset + "/seed" +
                                 std::to_string(m.synthetic.seed)
                           : m.revision;
    for (const auto& n : cluster->nodes) c.nodes.push_back(n.name);
    c.gmu = rep->chosen_gmu;
    c.kv_tokens = rep->chosen_kv_tokens;
    if (Status s = write_gmu_choice(ctx.global.state_dir, c); !s.ok()) return fail(s.error().what());
    if (!ctx.global.json) std::cout << "wrote " << gmu_choice_path(ctx.global.state_dir, c.lane) << "\n";
  }
  return kExitOk;
}

}  // namespace

void setup_gmu(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<GmuCliOptions>();
  auto* gmu =
      app.add_subcommand("gmu", "gpu-memory-utilization: find the window that boots and fits the KV target");
  gmu->require_subcommand(1);
  auto* b = gmu->add_subcommand("bisect", "analytic estimate from --dry-run-memory, confirmed by real boots");
  b->add_option("LANE", o->lane, "lane name or recipe .yaml path")->required();
  b->add_option("--min", o->bisect.min_gmu, "lowest G considered")->check(CLI::Range(0.01, 1.0));
  b->add_option("--max", o->bisect.max_gmu, "highest G considered")->check(CLI::Range(0.01, 1.0));
  b->add_option("--kv-target", o->bisect.kv_target,
                "KV tokens the pool must hold (0 = max_model_len x --concurrency)")
      ->check(CLI::NonNegativeNumber);
  b->add_option("--concurrency", o->concurrency, "target concurrency of max_model_len requests")
      ->check(CLI::PositiveNumber);
  b->add_option("--step", o->bisect.step, "climb step of the confirming boots")
      ->check(CLI::Range(0.001, 0.2));
  b->add_option("--max-boots", o->bisect.max_boots, "real boots at most")->check(CLI::Range(1, 50));
  b->add_option("--mem-floor-gib", o->mem_floor_gib,
                "refuse G whose budget leaves less MemAvailable than this (unified memory; 0 = off)")
      ->envname("SPARKCTL_GMU_MEM_FLOOR_GIB")
      ->check(CLI::NonNegativeNumber);
  b->add_option("--boot-timeout", o->boot_timeout_s, "seconds a boot may take to become ready")
      ->check(CLI::PositiveNumber);
  b->add_flag("--no-boot", o->no_boot, "analytic only: dry runs, no real boot");
  b->add_flag("--write", o->write, "store the chosen G for `up` in <state-dir>/gmu/<lane>.json");
  b->callback([&ctx, o] { ctx.exit_code = run_gmu_bisect(ctx, *o); });
}

}  // namespace spk::cli
