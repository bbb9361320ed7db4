// What `up` launched, kept so that the supervisor, `restart`, `status` and `logs` act on exactly the
// same processes without re-planning: <state-dir>/deploy/spec.json (written atomically). The API key
// itself is never in it: ranks get it in the env var `api_key_env`, read from `api_key_file` (0600).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kernels/base/status.h"
#include "recipes/recipe.h"

namespace spk {

struct RankLaunch {
  int rank = 0;
  std::string node;
  std::vector<std::string> argv;  // argv[0] = the node's sparkctl (or the runtime stand-in)
  std::vector<std::pair<std::string, std::string>> env;
  [[nodiscard]] std::string daemon_name() const { return "rank-" + std::to_string(rank); }
};

struct DeploySpec {
  std::string lane;
  std::string fingerprint;
  std::string cluster_file;  // empty = the implicit local cluster
  std::string endpoint;      // "http://127.0.0.1:8000/v1"
  std::string served_name;
  std::string api_key_env;
  std::string api_key_file;
  std::string shm_dir = "/dev/shm";
  int ready_timeout_s = 600;
  std::vector<std::pair<std::string, std::string>> run_dirs;  // node -> <node state dir>/deploy/run
  std::vector<RankLaunch> ranks;                              // rank order
  std::vector<WarmupPattern> warmup;

  [[nodiscard]] std::string run_dir(const std::string& node) const;
  [[nodiscard]] std::vector<std::string> nodes() const;  // run_dirs order (head first)
};

std::string deploy_dir(const std::string& state_dir);  // <state-dir>/deploy
Status write_deploy_spec(const std::string& state_dir, const DeploySpec& s);
Result<DeploySpec> read_deploy_spec(const std::string& state_dir);

}  // namespace spk
