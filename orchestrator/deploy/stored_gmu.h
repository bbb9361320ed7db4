// The GMU choice stored by `gmu bisect --write`, applied to a plan the same way by `plan` and `up`, so
// that `plan` prints exactly the argv `up` launches. A choice counts only when it was measured for the
// lane's model revision and the plan's node set; otherwise the recipe's value stays and the note says why.
#pragma once

#include <optional>
#include <string>

#include "orchestrator/plan.h"
#include "recipes/recipe.h"

namespace spk {

// "synthetic:ARCH/PRESET/seedN" for synthetic lanes, else the pinned revision (empty = unpinned).
std::string lane_model_revision(const Recipe& r);

// Replaces --gpu-memory-utilization in every rank's argv (plan.ranks and the launch steps' commands)
// with the stored choice of r.name in state_dir when it applies. Returns a one-line note for the user
// ("gpu_memory_utilization 0.929 from FILE" or "ignoring FILE: ..."), nullopt when nothing is stored.
std::optional<std::string> apply_stored_gmu(const std::string& state_dir, const Recipe& r, Plan& plan);

}  // namespace spk
