// LocalExec: the local node runs without SSH. fork + execve of `<binary> node <verb>` (no shell), stdin /
// stdout / stderr over pipes, its own process group so that a timeout kills the verb and its children.
#pragma once

#include <map>
#include <string>

#include "orchestrator/transport/remote_exec.h"

namespace spk {

struct LocalTarget {
  std::string name = "local";
  std::string binary;     // sparkctl to exec; empty = this process's own executable (/proc/self/exe)
  std::string node_root;  // exported as SPARKCTL_NODE_ROOT when set; else the variable is inherited
  std::map<std::string, std::string> extra_env;  // set on top of the inherited environment
};

class LocalExec final : public RemoteExec {
 public:
  explicit LocalExec(LocalTarget target);
  [[nodiscard]] const std::string& node() const override { return target_.name; }
  Result<ExecReply> run(NodeVerb verb, std::string_view input, std::chrono::milliseconds timeout) override;

 private:
  LocalTarget target_;
};

// Path of the running executable (readlink /proc/self/exe).
Result<std::string> self_executable();

}  // namespace spk
