// Node-side preflight: one JSON report of every check that can fail a launch on this node.
// Input keys (all optional): disk_path (default node root), need_disk_bytes, min_mem_available_bytes,
// ports [int], drop_caches (bool: drop the page cache now; root only; refused while a runtime is alive),
// expect_version, expect_binary_xxh3, shm_dir, shm_prefixes, model_dir (checked complete when present),
// model_required (absent model_dir fails instead of skipping).
// Each check: {name, status: ok|fail|skip, detail, fix}. Exit 1 when any check fails.
#pragma once

#include <nlohmann/json.hpp>
#include <vector>

#include "orchestrator/node/node_verbs.h"
#include "orchestrator/node/runtime_procs.h"

namespace spk {

VerbOutput run_preflight(const nlohmann::json& input, const NodeEnv& env);

// sync + write "3" to env.drop_caches_path. Refused (error) when not root or when `runtimes` is not
// empty: dropping while a runtime loads weights makes it re-read them from disk.
Status drop_page_cache(const NodeEnv& env, const std::vector<RuntimeProc>& runtimes);

}  // namespace spk
