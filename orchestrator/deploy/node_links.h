// The head's handles on the nodes of a deployment: one RemoteExec per node (LocalExec for the local
// node, SshExec otherwise, with the inventory's key, known_hosts and binary path) and the sparkctl path
// that node's daemons are exec'd from. Remote nodes get the head's binary pushed when its hash differs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "orchestrator/inventory.h"
#include "orchestrator/transport/remote_exec.h"

namespace spk {

struct NodeLink {
  Node node;
  std::unique_ptr<RemoteExec> exec;
  std::string binary;  // absolute path of sparkctl on that node
};

struct LinkOptions {
  bool accept_new_host_key = false;
  bool push_binary = true;  // remote nodes: push the head's binary when the node's hash differs
};

using ProgressFn = std::function<void(const std::string&)>;

// Links to the named nodes of `c` in the given order. Fails on the first node that cannot be reached
// (host key unknown or changed, auth, push): the error names the node and the fix.
Result<std::vector<NodeLink>> link_nodes(const Cluster& c, const std::vector<std::string>& names,
                                         const LinkOptions& opt, const ProgressFn& progress = {});

// The SPARKCTL_NODE_ROOT the local node's verbs and daemons run with: the variable when set, else the
// node's state dir (scopes stale-process detection to this installation).
std::string local_node_root(const Node& n);

NodeLink* find_link(std::vector<NodeLink>& links, const std::string& node);

}  // namespace spk
