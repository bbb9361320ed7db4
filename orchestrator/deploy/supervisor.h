// The supervisor daemon on the head (`sparkctl supervise`, started detached by `up`): every poll it asks
// each node which rank daemons are alive and GETs rank 0's /health. Any rank dead, or rank 0 hung by the
// engine's own progress signal (liveness.h: /health unanswered `hang_polls` polls in a row, or the engine
// reporting no step for `stall_after` with work pending; a slow /health under load is not a hang), means
// the engine is dead (TP ranks cannot survive a peer); the restart's event carries the evidence. It
// stops every rank, waits the backoff (orchestrator/deploy/backoff.h: 10 s doubling to 5 min, reset
// after 10 min healthy), and relaunches worker-first through bring_up (readiness + warmup). After the
// give-up budget it stops everything and marks the deployment failed. Every event goes to the event log
// and state.json (restarts per rank), which `status` shows.
#pragma once

#include <atomic>
#include <chrono>

#include "orchestrator/deploy/backoff.h"
#include "orchestrator/deploy/lifecycle.h"

namespace spk {

struct SupervisorOptions {
  DeployContext ctx;
  std::chrono::milliseconds poll{2000};
  std::chrono::milliseconds health_timeout{5000};
  int hang_polls = 3;
  std::chrono::milliseconds stall_after{60000};
  BackoffPolicy backoff;
};

// Returns 0 when `stop` was raised (SIGTERM from down/switch), 1 after giving up or when the
// deployment's spec cannot be read.
int run_supervisor(const SupervisorOptions& opt, const std::atomic<bool>& stop);

}  // namespace spk
