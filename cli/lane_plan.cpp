#include "cli/lane_plan.h"

#include <iostream>

#include "orchestrator/transport/local_exec.h"
#include "recipes/recipe_store.h"

namespace spk::cli {

Result<LanePlan> load_lane_plan(const Context& ctx, const std::string& lane, bool self_binary,
                                PlanOptions po) {
  SPK_ASSIGN(RecipeLoad loaded, load_named_recipe(lane, recipe_dirs(ctx.global.state_dir)));
  for (const auto& d : loaded.diagnostics)
    if (d.severity != Severity::not_honoured) std::cerr << d.str() << "\n";
  if (!loaded.ok()) return make_error(lane + " is invalid", "fix the lines above");
  ClusterLoad cl = load_cluster_or_local(ctx.global.cluster_file, ctx.global.state_dir);
  for (const auto& d : cl.diagnostics) std::cerr << d.str() << "\n";
  if (!cl.cluster) return make_error(ctx.global.cluster_file + " is invalid", "fix the lines above");
  if (self_binary) {
    SPK_ASSIGN(po.binary, self_executable());
  }
  SPK_ASSIGN(Plan plan, build_plan(*loaded.recipe, *cl.cluster, po));
  return LanePlan{std::move(*loaded.recipe), std::move(*cl.cluster), std::move(plan),
                  self_binary ? po.binary : std::string()};
}

}  // namespace spk::cli
