// SshTarget: everything SshExec needs to reach one node. The cluster inventory maps onto this later; the
// transport knows nothing about recipes or inventories.
#pragma once

#include <string>
#include <vector>

namespace spk {

struct SshTarget {
  std::string name;  // for messages; defaults to host:port when empty
  std::string host;  // address or name; no shell ever sees it
  int port = 22;
  std::string user;                         // empty = the current user
  std::vector<std::string> identity_files;  // empty = ssh-agent, then ~/.ssh/id_* (libssh's defaults)
  std::string known_hosts;                  // empty = ~/.ssh/known_hosts
  bool accept_new_host_key = false;  // unknown host key: refuse (false) or record it (true); changed = error
  bool read_ssh_config = true;       // apply ~/.ssh/config (libssh's subset) before our options
  // Absolute path of sparkctl on the node: the exec'd command is exactly "<remote_binary> node <verb>".
  // Restricted to [A-Za-z0-9._+/-] so that the remote shell has nothing to interpret.
  std::string remote_binary = "/usr/local/bin/sparkctl";
  int connect_timeout_s = 10;

  [[nodiscard]] std::string display() const {
    return name.empty() ? host + ":" + std::to_string(port) : name;
  }
};

}  // namespace spk
