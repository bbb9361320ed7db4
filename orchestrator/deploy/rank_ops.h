// Head-side operations on a deployment's rank daemons through the node verbs (launch, stop, ps,
// log-tail). Ranks are named rank-<R> in their node's run dir (see orchestrator/node/daemons.h).
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "orchestrator/deploy/deploy_spec.h"
#include "orchestrator/deploy/node_links.h"

namespace spk {

struct DaemonInfo {
  std::string node;
  std::string name;  // rank-<R>
  int pid = 0;
  bool alive = false;
  int64_t started_ms = 0;
  double uptime_s = 0;
  std::string exit_reason;  // a dead daemon's exit note (orchestrator/node/mem_floor.h), empty if none
  std::string exit_message;
};

// Starts one rank as a detached daemon; the API key is added to its env as `api_key_env`.
// The rendezvous token of a deployment's ranks: 16 hex digits of XXH3-64 over its API key.
std::string rendezvous_token(const std::string& api_key);

Result<int> launch_rank(NodeLink& link, const DeploySpec& spec, const RankLaunch& r,
                        const std::string& api_key);

// Runs argv on the node to its end (synth model), at most `timeout`; log <run dir>/<name>.log.
Status run_on_node(NodeLink& link, const std::string& run_dir, const std::string& name,
                   const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

// Stops every daemon in every node's run dir (SIGTERM, SIGKILL after grace). Error lists what survived.
Status stop_all(std::vector<NodeLink>& links, const DeploySpec& spec,
                std::chrono::milliseconds grace = std::chrono::seconds(10));

// Daemons of every node (a node that cannot be asked is an error naming it).
Result<std::vector<DaemonInfo>> ps_all(std::vector<NodeLink>& links, const DeploySpec& spec);

// The last `bytes` of every daemon log of every node, each line prefixed "[node/name] ".
std::string log_tails(std::vector<NodeLink>& links, const DeploySpec& spec, size_t bytes = 2048);

// One node's logs from `offsets` (name -> byte offset), advancing them; lines prefixed "[node/name] ".
// A partial last line is held back until its newline arrives.
Result<std::string> read_new_log_lines(NodeLink& link, const std::string& run_dir,
                                       std::map<std::string, uint64_t>& offsets, bool from_tail,
                                       size_t tail_bytes);

}  // namespace spk
