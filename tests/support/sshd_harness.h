// SshdCluster: real OpenSSH servers on loopback for multinode tests, one per "node".
//
//   auto c = spk::testing::SshdCluster::start({"127.0.0.2", "127.0.0.3", "127.0.0.4"});
//   if (!c.ok()) GTEST_SKIP() << c.error().what();      // sshd missing / not root: the reason, verbatim
//   spk::SshTarget t = (*c)->target(1, known_hosts_path, /*accept_new=*/true);
//   spk::SshExec exec(t);  ...                          // ~/.ssh/config is not read (read_ssh_config=false)
//
// Each node i gets, under one temp dir (removed at teardown):
//   node<i>/host_ed25519[.pub]  its own host key (ssh-keygen -t ed25519)
//   node<i>/sshd_config         ListenAddress <host>:<free port>, StrictModes no, UsePAM no, pubkey only,
//                               AuthorizedKeysFile <dir>/authorized_keys, Subsystem sftp internal-sftp,
//                               SetEnv SPARKCTL_NODE_ROOT=<root> [node_env...]  (no ForceCommand: the
//                               client's command runs)
//   node<i>/root/               the node's root: its state, cache and bin/sparkctl live here; every
//                               session sees it as $SPARKCTL_NODE_ROOT
// One client key (<dir>/client_ed25519) is authorized on every node; sessions log in as the current user.
// sshd runs as `/usr/sbin/sshd -D -e -f <config>` in its own session; stderr goes to node<i>/sshd.log.
// sshd and fake runtimes get PR_SET_PDEATHSIG=SIGKILL, so even a crashed test leaves no listener behind.
// Teardown (destructor) kills every sshd and all of its descendants (SIGKILL) and reaps them: no
// process outlives the cluster. All of 127/8 is on lo on Linux, so no interface setup is needed.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "orchestrator/transport/ssh_target.h"

namespace spk::testing {

struct SshdNode {
  std::string host;
  int port = 0;
  std::string dir;       // node<i>/
  std::string root;      // node<i>/root: SPARKCTL_NODE_ROOT of its sessions
  std::string host_key;  // private host key path
  std::string config;    // sshd_config path
  std::string log;       // sshd stderr
  pid_t pid = -1;        // sshd listener, -1 when stopped
};

class SshdCluster {
 public:
  // Starts one sshd per host and waits until each accepts TCP connections (<= 5 s each). `node_env[i]`
  // (optional, "NAME=value" items) is added to node i's SetEnv line: every session of that node sees it
  // (e.g. SPARKCTL_SYSFS_ROOT=<a fake sysfs tree>).
  static Result<std::unique_ptr<SshdCluster>> start(
      const std::vector<std::string>& hosts, const std::vector<std::vector<std::string>>& node_env = {});
  ~SshdCluster();
  SshdCluster(const SshdCluster&) = delete;
  SshdCluster& operator=(const SshdCluster&) = delete;

  [[nodiscard]] size_t size() const { return nodes_.size(); }
  [[nodiscard]] const SshdNode& node(size_t i) const { return nodes_.at(i); }
  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] const std::string& client_key() const { return client_key_; }

  // Target for node i: client key, its port, remote_binary = <root>/bin/sparkctl, ssh config not read.
  [[nodiscard]] SshTarget target(size_t i, const std::string& known_hosts, bool accept_new) const;

  // "SHA256:..." of node i's current host key (ssh-keygen -lf).
  [[nodiscard]] Result<std::string> host_fingerprint(size_t i) const;

  // Replaces node i's host key with a fresh one and restarts its sshd on the same address and port.
  Status rotate_host_key(size_t i);

  // Copies `binary` to node i's <root>/bin/sparkctl directly (no SSH), for tests that need it present.
  Status install_binary(size_t i, const std::string& binary) const;

 private:
  SshdCluster() = default;
  Status start_node(SshdNode& n);
  void stop_node(SshdNode& n);
  std::string dir_;
  std::string client_key_;
  std::vector<SshdNode> nodes_;
};

// Runs argv (no shell), returns exit code; stdout+stderr appended to *output when given.
int run_argv(const std::vector<std::string>& argv, std::string* output = nullptr);

// Starts a stand-in for a stale runtime: execs `fake_binary` with argv
// {"<root>/bin/sparkctl", "runtime", "serve", "--fake"} and SPARKCTL_NODE_ROOT=<root>, in its own session.
// It creates and maps <shm_dir>/sparkctl-<pid>-kv (1 MiB), then sleeps (at most 120 s). The caller reaps it.
// Returns once the segment exists (<= 5 s).
Result<pid_t> spawn_fake_runtime(const std::string& fake_binary, const std::string& root,
                                 const std::string& shm_dir);

// Pids of all descendants of `pid` (children, grandchildren, ...), from /proc/*/stat.
std::vector<pid_t> descendants(pid_t pid);

}  // namespace spk::testing
