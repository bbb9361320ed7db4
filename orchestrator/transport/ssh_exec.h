// SshExec: RemoteExec over libssh. One session per node (connected lazily, reconnected when dropped), one
// channel exec per call running the fixed command "<remote_binary> node <verb>" with the JSON on stdin.
// Not thread-safe: use one SshExec per node per thread (calls are serialized by an internal mutex).
#pragma once

#include <memory>
#include <mutex>

#include "orchestrator/transport/remote_exec.h"
#include "orchestrator/transport/ssh_target.h"

namespace spk {

class SshSession;

class SshExec final : public RemoteExec {
 public:
  explicit SshExec(SshTarget target);
  ~SshExec() override;

  [[nodiscard]] const std::string& node() const override { return name_; }
  [[nodiscard]] const SshTarget& target() const { return target_; }
  Result<ExecReply> run(NodeVerb verb, std::string_view input, std::chrono::milliseconds timeout) override;

  // Copies a local file to `remote_path` over SFTP: written to "<remote_path>.tmp.<n>", chmod `mode`, then
  // renamed over the old file (old file unlinked first: plain SFTP rename refuses to overwrite). Missing
  // parent directories are created. A running old binary keeps its inode.
  Status push_file(const std::string& local_path, const std::string& remote_path, unsigned mode);

  // Connects now (host key check + auth) without running anything.
  Status connect(int timeout_s);

 private:
  Status ensure_session(int timeout_s);
  SshTarget target_;
  std::string name_;
  std::unique_ptr<SshSession> session_;
  std::mutex mu_;
};

}  // namespace spk
