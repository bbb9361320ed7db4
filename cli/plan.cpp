// `sparkctl plan LANE`: the ordered steps and the exact per-node argv/env that `up LANE` would run on
// the cluster (--cluster FILE or the implicit `local` one). Reads only; changes nothing. --json prints
// the Plan as one JSON document. Exit 1 when the recipe or the inventory is invalid or cannot fit.
#include "orchestrator/plan.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/verbs.h"
#include "recipes/recipe_store.h"

namespace spk::cli {
namespace {

struct PlanCliOptions {
  std::string lane;
};

int run_plan(Context& ctx, const PlanCliOptions& o) {
  auto loaded = load_named_recipe(o.lane, recipe_dirs(ctx.global.state_dir));
  if (!loaded) {
    print_error("plan", loaded.error().what());
    return kExitFailed;
  }
  // Errors and warnings go to stderr so that --json stdout stays one document; notes are in the plan.
  for (const auto& d : loaded->diagnostics)
    if (d.severity != Severity::not_honoured) std::cerr << d.str() << "\n";
  if (!loaded->ok()) {
    print_error("plan", o.lane + " is invalid (fix the lines above)");
    return kExitFailed;
  }
  ClusterLoad cl = load_cluster_or_local(ctx.global.cluster_file, ctx.global.state_dir);
  for (const auto& d : cl.diagnostics) std::cerr << d.str() << "\n";
  if (!cl.cluster) {
    print_error("plan", ctx.global.cluster_file + " is invalid (fix the lines above)");
    return kExitFailed;
  }
  auto plan = build_plan(*loaded->recipe, *cl.cluster);
  if (!plan) {
    print_error("plan", plan.error().what());
    return kExitFailed;
  }
  if (ctx.global.json)
    std::cout << to_json(*plan).dump(2) << "\n";
  else
    std::cout << to_text(*plan);
  return kExitOk;
}

}  // namespace

void setup_plan(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<PlanCliOptions>();
  auto* plan =
      app.add_subcommand("plan", "print the steps and per-node argv/env that up would run (changes nothing)");
  plan->add_option("LANE", o->lane, "lane name (see `sparkctl recipe list`) or a recipe .yaml path")
      ->required();
  plan->callback([&ctx, o] { ctx.exit_code = run_plan(ctx, *o); });
}

}  // namespace spk::cli
