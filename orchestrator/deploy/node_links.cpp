#include "orchestrator/deploy/node_links.h"

#include <cstdlib>

#include "orchestrator/transport/binary_push.h"
#include "orchestrator/transport/local_exec.h"
#include "orchestrator/transport/ssh_exec.h"

namespace spk {

std::string local_node_root(const Node& n) {
  const char* r = std::getenv("SPARKCTL_NODE_ROOT");
  return r && *r ? std::string(r) : n.state_dir;
}

NodeLink* find_link(std::vector<NodeLink>& links, const std::string& node) {
  for (auto& l : links)
    if (l.node.name == node) return &l;
  return nullptr;
}

Result<std::vector<NodeLink>> link_nodes(const Cluster& c, const std::vector<std::string>& names,
                                         const LinkOptions& opt, const ProgressFn& progress) {
  SPK_ASSIGN(std::string self, self_executable());
  std::vector<NodeLink> out;
  for (const auto& name : names) {
    const Node* n = nullptr;
    for (const auto& x : c.nodes)
      if (x.name == name) n = &x;
    if (!n)
      return make_error("node '" + name + "' is not in cluster '" + c.name + "' (" + c.source + ")",
                        "the deployment was made with another inventory: pass the same --cluster");
    NodeLink l;
    l.node = *n;
    if (n->local) {
      l.exec = std::make_unique<LocalExec>(LocalTarget{n->name, self, local_node_root(*n), {}});
      l.binary = self;
    } else {
      SshTarget t = ssh_target(*n);
      t.accept_new_host_key = opt.accept_new_host_key;
      auto ssh = std::make_unique<SshExec>(t);
      if (Status s = ssh->connect(t.connect_timeout_s); !s.ok())
        return make_error(n->name + ": " + s.error().message, s.error().fix, s.error().retryable);
      if (opt.push_binary) {
        auto pushed = ensure_node_binary(*ssh, self);
        if (!pushed) return make_error(n->name + ": " + pushed.error().message, pushed.error().fix);
        if (progress && pushed->pushed)
          progress(n->name + ": pushed sparkctl (" + std::to_string(pushed->bytes) + " bytes, " +
                   pushed->hash + ")");
      }
      l.binary = t.remote_binary;
      l.exec = std::move(ssh);
    }
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace spk
