// `stage LANE`: make the lane's checkpoint complete on every node it uses. The head gets it first (hub:
// hub_download + model_dir linked to the snapshot, synthetic: generate with the plan's own command, path:
// must already be there); each worker then receives the head's tree over the fabric (push.h: `node
// stage-recv` started through the node's RemoteExec, push_tree() to its reach address) and is verified
// (verify.h) against the head's file list. Files only on a worker are removed after its push when the
// model dir is sparkctl's own (synthetic, hub); in a path lane's dir (the user's) they are reported and
// the node stays incomplete. verify_only changes nothing anywhere: it reports per node, extra files
// included.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "orchestrator/inventory.h"
#include "orchestrator/plan.h"
#include "orchestrator/staging/push/push.h"
#include "orchestrator/staging/verify.h"
#include "orchestrator/transport/remote_exec.h"
#include "recipes/recipe.h"

namespace spk::staging {

struct StageOptions {
  bool verify_only = false;
  // verify_only: compare every worker file's XXH3 with the head's (reads everything once); else the push
  // hashes every block on both ends instead of skipping files whose size and mtime match.
  bool hash = false;
  int port = 29650;  // stage-recv port on every worker
  int streams = 4;
  std::string log_dir;  // synth-model log goes here
  // How the head reaches a node's `sparkctl node` entrypoint (LocalExec / SshExec with the head's binary
  // in place); an error marks that node failed.
  std::function<Result<std::unique_ptr<RemoteExec>>(const Node&)> exec_for;
  std::function<void(const std::string& node, const PushProgress&)> progress;  // may be empty
};

struct NodeStage {
  std::string node, dir;
  bool pushed = false;
  PushReport push;
  VerifyReport verify;
  std::string error;  // push or transport failure; empty = none

  [[nodiscard]] bool ok() const { return error.empty() && verify.complete(); }
};

struct StageReport {
  std::string lane;
  std::vector<NodeStage> nodes;  // head first

  [[nodiscard]] bool ok() const;
  [[nodiscard]] nlohmann::json to_json() const;
  [[nodiscard]] std::string to_text() const;
};

// Errors only for what stops the whole stage (plan, head copy missing); per-node failures are in the
// report.
Result<StageReport> stage_lane(const Recipe& r, const Cluster& c, const Plan& plan, const StageOptions& opt);

// Head copy of a hub lane: hub_download() into <cache_dir>/hub (HF_TOKEN, HF_ENDPOINT, HF_HUB_OFFLINE from
// the environment), then `dir` (model_dir) becomes a symlink to the snapshot.
Status fetch_from_hub(const Recipe& r, const Node& head, const std::string& dir);

// 32 hex characters from /dev/urandom: the push session's token.
Result<std::string> random_token();

}  // namespace spk::staging
