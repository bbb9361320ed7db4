// `up LANE`, `down`, `restart`, `switch LANE` as library calls (cli/ only parses flags and prints).
// up: plan -> link nodes (push the binary where it differs) -> reuse check (a live deployment with the
// same fingerprint is "already up"; another fingerprint is refused: use switch) -> preflight on every node
// (one report) -> multi-node: fabric setup (asked), fabric gate, synth model on the head, stage (head
// first, pushed to workers; moves nothing when complete), each node's own fabric env into its ranks' env
// (fabric_gate.h) -> synth model (one node) -> memory fit -> bring_up (lifecycle.h) -> state.json phase
// ready -> supervisor. The stored GMU choice (<state-dir>/gmu/<lane>.json) replaces the recipe's
// gpu_memory_utilization when it was measured for the same model revision and node set.
// API key: $<api_key_env> when set, else the state dir's existing key, else a new random one; written to
// <state-dir>/deploy/api_key (0600).
// Test hook: SPARKCTL_RUNTIME_STANDIN=/abs/exe replaces `sparkctl runtime serve` in every rank's argv (same
// flags) and lets a plan this build cannot honour run; `up` says so. For orchestration tests only.
#pragma once

#include <string>

#include "orchestrator/deploy/lifecycle.h"

namespace spk {

struct UpOptions {
  std::string lane;
  bool clean = false;       // run `node clean` on every node before preflight
  bool drop_caches = true;  // drop the page cache on every node before launch (root only)
  int ready_timeout_s = 600;
  bool supervise = true;  // start the supervisor daemon
  std::string shm_dir = "/dev/shm";
  // Multi-node lanes (see orchestrator/deploy/fabric_gate.h and plan.h's steps):
  bool fabric_setup = false;  // run `fabric setup` on every node first (also the recipe's fabric.setup)
  bool skip_fabric = false;   // no fabric gate, no per-node fabric env
  bool skip_stage = false;    // no staging: preflight checks the weights on every node
  int stage_port = 29650;     // stage-recv port on every worker (fabric address)
};

enum class UpOutcome { started, already_up };

Result<UpOutcome> deploy_up(const DeployContext& ctx, const UpOptions& opt);

// `switch LANE`: never leaves the cluster worse off. Before the old deployment stops: recipe, inventory
// (the deployment's own when ctx has none, as restart does), plan, what this build runs, node links and
// every preflight check that needs none of the old ranks' resources (their ports and runtimes); a failure
// there refuses the switch and the old lane keeps serving. Then the old deployment stops (with clean) and
// the new one comes up; when it fails the old spec is brought back. When that fails too the error and
// state.json's message start with "nothing is serving:" and say why.
Result<UpOutcome> deploy_switch(const DeployContext& ctx, const UpOptions& opt);

// Stops everything of the deployment in ctx.state_dir; "nothing to stop" is ok. State phase stopped.
Status deploy_down(const DeployContext& ctx, bool clean);

// Stop every rank and bring the same spec up again (worker first), then the supervisor.
Status deploy_restart(const DeployContext& ctx);

}  // namespace spk
