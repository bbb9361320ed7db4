// A lane's recipe, the cluster it runs on and its plan, loaded the way every lane verb loads them:
// errors and warnings of both files go to stderr (not-honoured notes stay in the plan), and the first
// failure comes back as one Error for the verb to print.
#pragma once

#include <string>

#include "cli/context.h"
#include "kernels/base/status.h"
#include "orchestrator/inventory.h"
#include "orchestrator/plan.h"
#include "recipes/recipe.h"

namespace spk::cli {

struct LanePlan {
  Recipe recipe;
  Cluster cluster;
  Plan plan;
  std::string self;  // this executable's path when self_binary, else empty
};

// self_binary: the plan's commands start with this executable's path (verbs that run them); otherwise
// with plain "sparkctl" (what `plan` prints). `po` carries the plan flags (binary is set here).
Result<LanePlan> load_lane_plan(const Context& ctx, const std::string& lane, bool self_binary,
                                PlanOptions po = {});

}  // namespace spk::cli
