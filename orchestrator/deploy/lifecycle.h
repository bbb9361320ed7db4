// The deployment life cycle shared by up, down, restart, switch and the supervisor:
//   bring_up: launch worker ranks first (detached), rank 0 last, wait for a real completion token,
//             run the warmup, read rank 0's KV size; on any failure print the tail of every node's log
//             and stop everything it started (nothing half-started is left).
//   teardown: stop the supervisor, then every rank on every node (and, with clean, stale runtimes and
//             leaked shared memory through `node clean`).
// Progress lines read "[  12.3s] phase: what" (elapsed since the verb started).
#pragma once

#include <chrono>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "orchestrator/deploy/deploy_spec.h"
#include "orchestrator/deploy/deploy_state.h"
#include "orchestrator/deploy/node_links.h"

namespace spk {

class Progress {
 public:
  explicit Progress(std::ostream* os) : os_(os), t0_(std::chrono::steady_clock::now()) {}
  void operator()(const std::string& phase, const std::string& what) const;
  [[nodiscard]] ProgressFn fn(const std::string& phase) const {
    return [this, phase](const std::string& w) { (*this)(phase, w); };
  }

 private:
  std::ostream* os_;
  std::chrono::steady_clock::time_point t0_;
};

struct DeployContext {
  std::string state_dir;
  std::string cluster_file;  // empty = the implicit local cluster
  bool accept_new_host_key = false;
  std::ostream* out = nullptr;  // progress; nullptr = quiet
};

// Loads the cluster of `cluster_file` (or the local one) and links the spec's nodes.
Result<std::vector<NodeLink>> link_spec_nodes(const DeployContext& ctx, const DeploySpec& spec,
                                              bool push_binary);

// `stop_requested` (may be null) is polled while waiting: true aborts the bring-up (and stops the ranks).
// On success `state` holds the ranks' pids, phase ready and rank 0's KV size.
Status bring_up(std::vector<NodeLink>& links, const DeploySpec& spec, const std::string& api_key,
                DeployState& state, const Progress& progress,
                const std::function<bool()>& stop_requested = {});

// API key: read from spec.api_key_file.
Result<std::string> read_api_key(const DeploySpec& spec);

// The supervisor daemon (`sparkctl supervise`) of this state dir: started detached, pidfile in
// <state-dir>/deploy/supervisor/. Returns its pid.
Result<int> start_supervisor(const DeployContext& ctx);
void stop_supervisor(const std::string& state_dir);
bool supervisor_alive(const std::string& state_dir, int* pid = nullptr);

// Stops the supervisor and every rank; with `clean` also runs `node clean` on every node (shm_dir of
// the spec). The error names what survived.
Status teardown(std::vector<NodeLink>& links, const DeploySpec& spec, const std::string& state_dir,
                bool clean, const Progress& progress);

}  // namespace spk
