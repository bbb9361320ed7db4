// JSON in, JSON out: the one entry point `sparkctl node <verb>` needs for the fabric verbs on a node.
// The orchestrator sends {"verb": .., "request": {..}} on stdin; the node answers the result object.
//   "fabric-show"   request DiscoverRequest                        -> NodeFabric
//   "fabric-env"    request {"discover": DiscoverRequest, "env": EnvRequest}   -> FabricEnv
//   "fabric-setup"  request SetupRequest                           -> SetupResult   (root)
//   "fabric-doctor" request DoctorRequest                          -> DoctorResult
// Addresses come from the kernel unless the request carries "addresses" (StaticNetView JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kernels/base/status.h"

namespace spk::fabric {

// Error for an unknown verb or a request that does not parse (names the bad field).
Result<nlohmann::json> run_node_request(const std::string& verb, const nlohmann::json& request);

}  // namespace spk::fabric
