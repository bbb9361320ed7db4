// `sparkctl plan LANE`: the ordered steps and the exact per-node argv/env that `up LANE` would run on
// the cluster (--cluster FILE or the implicit `local` one). Reads only; changes nothing. --json prints
// the Plan as one JSON document. Exit 1 when the recipe or the inventory is invalid or cannot fit.
#include "orchestrator/plan.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/json_out.h"
#include "cli/lane_plan.h"
#include "cli/verbs.h"
#include "recipes/recipe_store.h"

namespace spk::cli {
namespace {

struct PlanCliOptions {
  std::string lane;
};

int run_plan(Context& ctx, const PlanCliOptions& o) {
  // Errors and warnings go to stderr so that --json stdout stays one document; notes are in the plan.
  auto lp = load_lane_plan(ctx, o.lane, /*self_binary=*/false);
  if (!lp) {
    print_error("plan", lp.error().what());
    return kExitFailed;
  }
  const Plan* plan = &lp->plan;
  if (ctx.global.json)
    std::cout << json_text(to_json(*plan)) << "\n";
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
