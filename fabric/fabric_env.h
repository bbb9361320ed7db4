// NCCL/Gloo/rendezvous environment for one node, built from that node's own GID plan. The plan verb
// (recipes) calls fabric_env() per node with the node's discovered fabric and the recipe's overrides,
// and puts the result into that node's launch env. Every variable records where its value came from.
//
// Variables set (before overrides):
//   NCCL_IB_HCA          chosen devices, both CX7 halves when usable: "rocep1s0f0,roceP2p1s0f0"
//   NCCL_IB_GID_INDEX    this node's RoCE v2 index (per node, never shared) -- or, when
//                        use_addr_range is set or the halves disagree on the index:
//   NCCL_IB_ADDR_RANGE   the fabric subnet "192.168.100.0/24" (+ NCCL_IB_ADDR_FAMILY=AF_INET); NCCL then
//                        picks the matching GID on each device itself
//   NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME   the primary device's netdev
//   SPARKCTL_HOST_IP, VLLM_HOST_IP           this node's fabric IPv4 (rendezvous advertises it)
// Overrides are applied last; an override with an empty value removes the variable.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fabric/gid_choice.h"

namespace spk::fabric {

struct EnvVar {
  std::string value;
  std::string
      source;  // "gid table rocep1s0f0 port 1 index 3 (::ffff:192.168.100.1 RoCE v2)", "recipe override"
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(EnvVar, value, source)

struct FabricEnv {
  std::string node;
  std::map<std::string, EnvVar> vars;
  GidPlan plan;  // what the values were derived from
  // Overrides that contradict this node's table, e.g. a recipe-wide NCCL_IB_GID_INDEX=3 on a node whose
  // RoCE v2 GID sits at 5 (the classic "one index copied to all nodes" failure). The plan prints them.
  std::vector<std::string> warnings;

  [[nodiscard]] std::map<std::string, std::string> values() const;  // var -> value, for exec
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(FabricEnv, node, vars, plan, warnings)

struct EnvRequest {
  GidRequest gid;                                // fabric CIDR (+ optional explicit HCAs)
  bool use_addr_range = false;                   // recipe asks for NCCL_IB_ADDR_RANGE instead of an index
  std::map<std::string, std::string> overrides;  // recipe env, applied last
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(EnvRequest, gid, use_addr_range, overrides)

// Chooses the GIDs on `node` (see gid_choice.h) and builds the env. Fails exactly when choose_gids does.
Result<FabricEnv> fabric_env(const NodeFabric& node, const EnvRequest& req);
// Same from an already made plan.
FabricEnv fabric_env(const GidPlan& plan, const EnvRequest& req);

}  // namespace spk::fabric
