// Memory fit before launch: every rank's own runtime argv, run with --dry-run-memory on its node
// (`node launch` with wait_ms: no pidfile, no port, no GPU allocation), so the runtime's memory planner
// (runtime/serve/memory_planner.h) answers with the lane's real values — weights of this rank's shard,
// activations of max_num_batched_tokens, KV bytes per token of kv_cache_dtype, GMU — before anything
// starts. A planner refusal names the shortfall and the knobs that move it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "orchestrator/deploy/node_links.h"
#include "orchestrator/plan.h"

namespace spk {

struct RankFit {
  int rank = 0;
  std::string node;
  std::string status;  // fits | short | skipped | error
  std::string detail;  // fits: "KV cache 12345 tokens (1.50 GiB)"; short: the planner's message; ...
  int64_t kv_tokens = 0;
};

struct MemoryFit {
  std::vector<RankFit> ranks;
  [[nodiscard]] bool refused() const;  // some rank is short or its dry run failed
  [[nodiscard]] bool checked() const;  // some rank was checked (not every one skipped)
  // One line per rank, then, when refused, the knobs of `argv` (rank 0's) that change the answer.
  [[nodiscard]] std::string text(const std::vector<std::string>& argv) const;
};

// "gpu_memory_utilization 0.9, max_model_len 4096, max_num_batched_tokens 8192, kv_cache_dtype auto,
// tensor_parallel 2 (recipe keys; `sparkctl gmu bisect LANE` finds the GMU)" from a runtime argv.
std::string memory_knobs(const std::vector<std::string>& argv);

// The planner's JSON (or {"error": ...}) as one RankFit; "error" when `out` holds no JSON object.
RankFit parse_dry_run(int rank, const std::string& node, int exit_code, const std::string& out);

// Every rank of `plan` on its node through `links` (argv[0] replaced by the node's binary, the rank's
// env added). The model must be on the node (`up` runs it after preflight's weights check and synthesis).
MemoryFit check_memory_fit(std::vector<NodeLink>& links, const Plan& plan,
                           std::chrono::milliseconds timeout = std::chrono::minutes(10));

// Plan / recipe validate: the same, run here with `binary`, for ranks whose model dir exists on this
// machine and is a CPU checkpoint of at most 4 GiB (the dry run loads the weights; it must not compete
// with what this machine serves); the others are skipped with the reason.
MemoryFit check_memory_fit_here(const std::string& binary, const std::string& scratch_dir, const Recipe& r,
                                const Plan& plan, const Cluster& c);

}  // namespace spk
