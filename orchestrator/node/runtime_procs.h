// Stale `sparkctl runtime` processes: found by scanning /proc/*/cmdline (argv[0] basename "sparkctl",
// argv[1] "runtime"). A process belongs to this node's installation when its SPARKCTL_NODE_ROOT
// environment value equals ours (both unset counts as equal), so that two roots on one host (tests, two
// users) never see or kill each other's runtimes.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace spk {

struct RuntimeProc {
  pid_t pid = 0;
  pid_t pgid = 0;
  std::string cmdline;  // argv joined with spaces, for reports
};

// `node_root_env`: our SPARKCTL_NODE_ROOT value, nullopt when unset. Never lists the calling process.
std::vector<RuntimeProc> find_runtime_processes(const std::optional<std::string>& node_root_env,
                                                const std::string& proc_dir = "/proc");

// SIGTERM, wait up to `grace_ms`, then SIGKILL. A process that leads its own group (how the launcher
// starts runtimes: setsid) is killed with its whole group; otherwise only the pid (never our own group).
// Returns the pids that are gone afterwards.
std::vector<pid_t> kill_runtime_processes(const std::vector<RuntimeProc>& procs, int grace_ms = 3000);

bool pid_alive(pid_t pid);

}  // namespace spk
