// The node side of the fixed entrypoint `sparkctl node <verb>`: JSON object in (stdin; empty = {}), one
// JSON object out, exit 0 ok / 1 a check failed / 2 bad input (unknown key, wrong type, not JSON).
//   version   {}                                    -> {version, binary, binary_xxh3}
//   echo      any object                            -> the same object
//   facts     {disk_path?, shm_dir?, shm_prefixes?} -> memory, disk, runtime processes, shm segments
//   preflight see preflight.h                       -> {ok, checks:[{name,status,detail,fix}], facts}
//   clean     {shm_dir?, shm_prefixes?, grace_ms?}  -> {ok, killed, removed_shm, remaining}
//   launch | stop | ps | log-tail: detached daemons, see daemons.h
//   stage-recv, stage-verify: see stage_verbs.h
//   fabric-doctor | fabric-setup | fabric-env: the fabric verbs on this node, see fabric_verbs.h
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "orchestrator/transport/node_verb.h"

namespace spk {

// Where this node's installation lives. SPARKCTL_NODE_ROOT, when set, scopes state, cache, the binary
// copy and which runtime processes count as ours (see runtime_procs.h).
struct NodeEnv {
  std::string node_root;                // SPARKCTL_NODE_ROOT, else the state dir
  std::optional<std::string> root_env;  // SPARKCTL_NODE_ROOT exactly as set; nullopt = unset
  std::string binary;                   // this executable
  std::string version;                  // SPARKCTL_VERSION
  std::string drop_caches_path = "/proc/sys/vm/drop_caches";
};

// Reads SPARKCTL_NODE_ROOT and /proc/self/exe; `state_dir` is the fallback root.
NodeEnv node_env_from_process(const std::string& state_dir);

struct VerbOutput {
  int exit_code = 0;
  nlohmann::json body;  // always an object; on exit 2: {ok:false, error, fix}
};

VerbOutput run_node_verb(NodeVerb verb, std::string_view input, const NodeEnv& env);

// Exit codes of node verbs.
inline constexpr int kNodeOk = 0;
inline constexpr int kNodeCheckFailed = 1;
inline constexpr int kNodeBadInput = 2;

}  // namespace spk
