// The fabric verbs of the node entrypoint: `sparkctl node fabric-doctor | fabric-setup | fabric-env`. The
// head sends the typed request of fabric/node_api.h as JSON on stdin; the checks and changes run ON the
// node (its sysfs, its kernel's links and addresses, its NCCL), in the node process's network namespace.
//   fabric-doctor  DoctorRequest              -> DoctorResult   exit 0 all findings ok, 1 some failed
//   fabric-setup   SetupRequest (root)        -> SetupResult    exit 0 applied (or nothing to change)
//   fabric-env     {discover, env}            -> FabricEnv      exit 0; a node without any RDMA device
//                                                answers {ok, node, verdict} (kNoRdmaVerdict) instead
// A request without a sysfs root reads $SPARKCTL_SYSFS_ROOT when set (the same variable `sparkctl fabric`
// reads: a fake sysfs tree in tests, a container's bind mount), else /sys. Failures answer
// {ok: false, error, fix} with exit 1.
#pragma once

#include <nlohmann/json.hpp>

#include "orchestrator/node/node_verbs.h"

namespace spk {

VerbOutput run_fabric_verb(NodeVerb verb, const nlohmann::json& in);

}  // namespace spk
