// Make a node run the head's exact sparkctl: ask the node's copy for its hash (`node version`), push over
// SFTP when it differs or is missing, then ask again and require equality.
#pragma once

#include <string>

#include "orchestrator/transport/ssh_exec.h"

namespace spk {

struct PushOutcome {
  bool pushed = false;      // false: the node's copy already had the head's hash
  std::string hash;         // XXH3-64 hex of the head's binary (== the node's now)
  std::string hash_before;  // the node's hash before; empty when it had no working copy
  size_t bytes = 0;         // bytes sent (0 when skipped)
};

// `local_binary` empty = this process's own executable.
Result<PushOutcome> ensure_node_binary(SshExec& exec, const std::string& local_binary = {});

}  // namespace spk
