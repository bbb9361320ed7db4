// Deployment state in the state dir: <state-dir>/deploy/state.json, written atomically (write_file_atomic),
// so `status`, `down` and the supervisor never read a half-written file. One deployment per state dir.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace spk {

struct RankState {
  int rank = 0;
  std::string node;
  int pid = 0;             // 0 = not running
  std::string phase;       // launching | ready | dead | stopped
  int64_t started_ms = 0;  // wall clock (ms since epoch) of the current launch
  int restarts = 0;
  std::string endpoint;  // rank 0 only: http://host:port
  int64_t kv_bytes = 0;
  int64_t kv_tokens = 0;  // rank 0: "KV cache size: N tokens" from its log; 0 = unknown
};

struct DeployState {
  std::string lane;
  std::string fingerprint;
  std::string phase;  // planning | preflight | launching | warmup | ready | failed | stopped
  int supervisor_pid = 0;
  std::vector<RankState> ranks;
  std::string endpoint;      // "http://127.0.0.1:8000/v1"
  std::string api_key_file;  // where the API key is (0600); ranks get it through their env
  std::string message;       // phase failed: why
};

std::string deploy_state_path(const std::string& state_dir);
Status write_deploy_state(const std::string& state_dir, const DeployState& s);
// Error (not retryable) when absent: "no deployment in D (run sparkctl up LANE)".
Result<DeployState> read_deploy_state(const std::string& state_dir);

}  // namespace spk
