// SshSession: one authenticated libssh session to one node (internal to the transport). Connecting checks
// the host key against known_hosts first: unknown = refused unless accept_new_host_key (the SHA256
// fingerprint is printed either way), changed = hard error, never retryable. Then key auth: the target's
// identity files, else ssh-agent and ~/.ssh/id_* (libssh's publickey_auto).
#pragma once

#include <libssh/libssh.h>

#include <memory>
#include <string>

#include "kernels/base/status.h"
#include "orchestrator/transport/ssh_target.h"

namespace spk {

class SshSession {
 public:
  ~SshSession();
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;

  // Connects within timeout_s (capped by target.connect_timeout_s).
  static Result<std::unique_ptr<SshSession>> connect(const SshTarget& target, int timeout_s);

  [[nodiscard]] ssh_session raw() const { return s_; }
  [[nodiscard]] bool alive() const;
  // "SHA256:..." of the host key this session verified.
  [[nodiscard]] const std::string& host_fingerprint() const { return fingerprint_; }

 private:
  explicit SshSession(ssh_session s) : s_(s) {}
  ssh_session s_;
  std::string fingerprint_;
};

// The remote command line for a verb, or an error when remote_binary could be interpreted by a shell.
Result<std::string> remote_command(const SshTarget& target, std::string_view verb);

}  // namespace spk
