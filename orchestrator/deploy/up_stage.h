// The stage_weights phase of `up` for a multi-node lane: staging::stage_lane() (the head's copy first,
// then pushed to every worker and verified there) with progress per node. A node whose copy is complete
// moves nothing (files whose size and mtime match are skipped unread). Error = refusal, naming the node.
#pragma once

#include <string>

#include "kernels/base/status.h"
#include "orchestrator/deploy/lifecycle.h"
#include "orchestrator/inventory.h"
#include "orchestrator/plan.h"
#include "recipes/recipe.h"

namespace spk {

struct UpStageOptions {
  std::string self;  // this executable: the local node's entrypoint
  bool accept_new_host_key = false;
  int port = 29650;     // stage-recv port on every worker
  std::string log_dir;  // the head's synth-model log
};

Status stage_for_up(const Recipe& r, const Cluster& c, const Plan& plan, const UpStageOptions& opt,
                    const Progress& progress);

}  // namespace spk
