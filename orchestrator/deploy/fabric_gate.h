// Head side of the fabric phases of `up` for a multi-node lane (plan.h: fabric_setup, fabric_doctor,
// fabric_env). Each runs ON the node through the fixed entrypoint (`sparkctl node fabric-setup |
// fabric-doctor | fabric-env`, orchestrator/node/fabric_verbs.h) with a typed request built from the
// inventory (fabric.interface, fabric.ip, fabric.hca) and the recipe (fabric.mtu, env):
//   setup  (asked, root on the node): IP on the interface, MTU, link up; reports what changed
//   gate   `fabric doctor` on every node, all before any rank starts: IP, MTU >= asked (an MTU above it
//          passes), DF ping at MTU-28 to every peer's fabric IP, link up, RoCE v2 GID, both CX7 halves,
//          port rate, NCCL found + version (cuda lanes; cpu lanes use Gloo). A failing finding refuses the
//          lane with "node check: what was seen" and the fix. A node without RDMA gets the one-line verdict
//          (TP over Gloo/TCP) and passes for cpu lanes; cuda lanes are refused there.
//   env    that node's own NCCL/Gloo env (fabric/fabric_env.h: NCCL_IB_HCA with both halves, its own
//          NCCL_IB_GID_INDEX, NCCL_SOCKET_IFNAME, GLOO_SOCKET_IFNAME, SPARKCTL_HOST_IP) into the env of
//          the ranks on that node; the recipe's env is applied last (it wins, with a warning when it pins
//          a GID index the node's table contradicts).
#pragma once

#include <string>
#include <vector>

#include "fabric/fabric_env.h"
#include "kernels/base/status.h"
#include "orchestrator/deploy/lifecycle.h"
#include "orchestrator/deploy/node_links.h"
#include "orchestrator/plan.h"
#include "recipes/recipe.h"

namespace spk {

// `fabric setup` on every node with a fabric.interface; progress names each change per node.
Status fabric_setup_all(std::vector<NodeLink>& links, const Recipe& r, const Progress& progress);

// `fabric doctor` on every node; progress prints every finding per node. Error = refusal.
Status fabric_gate(std::vector<NodeLink>& links, const Recipe& r, const Progress& progress);

struct NodeFabricEnv {
  std::string node;
  bool rdma = true;     // false: no RDMA device, `verdict` says so and `env` is empty
  std::string verdict;  // fabric::kNoRdmaVerdict when !rdma
  fabric::FabricEnv env;
};

// `node fabric-env` on every node that has a fabric.ip (read-only). Error names the node and the fix.
Result<std::vector<NodeFabricEnv>> fabric_envs(std::vector<NodeLink>& links, const Recipe& r);

// Puts each node's variables into the env of its ranks (plan.ranks and the launch steps' commands) and
// marks the fabric_env step resolved. Returns one line per node for progress (and notes for warnings).
std::vector<std::string> apply_fabric_envs(Plan& plan, const std::vector<NodeFabricEnv>& envs);

}  // namespace spk
