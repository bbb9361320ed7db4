// Busy or hung: the supervisor's judgement of rank 0, from the engine's own progress signal rather than
// from how fast /health answers under load. The runtime answers /health on its connection front (never
// behind queued requests) with {"engine": {"steps", "idle", "stalled_ms", "running", "waiting"}}:
// stalled_ms is how long the engine loop has had work without completing a turn. So:
//   answered, stalled_ms below stall_after      -> alive (busy or idle: steps advance or there is no work)
//   answered, stalled_ms at or past stall_after -> hung (the engine thread is stuck in a step)
//   not answered (refused, timeout, non-200) `unanswered_polls` polls in a row -> hung (the process is
//     wedged or gone); fewer -> suspect, nothing is done yet.
// Every hung verdict carries its evidence (the figures seen), which the supervisor logs with the restart.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "orchestrator/deploy/readiness.h"

namespace spk {

struct HealthProbe {
  bool answered = false;  // HTTP 200
  int status = 0;         // HTTP status, 0 when no answer
  std::string error;      // why not answered
  double latency_s = 0;
  bool has_engine = false;  // the runtime reported its progress (stand-ins may not)
  uint64_t steps = 0;
  bool idle = true;
  int64_t stalled_ms = 0;
  int running = 0, waiting = 0;
};

// GET /health within `timeout`, parsed.
HealthProbe probe_health(const HttpEndpoint& ep, std::chrono::milliseconds timeout);

struct LivenessPolicy {
  std::chrono::milliseconds stall_after{60000};
  int unanswered_polls = 3;
};

class LivenessJudge {
 public:
  explicit LivenessJudge(LivenessPolicy p) : p_(p) {}
  enum class Verdict { alive, suspect, hung };
  // One poll's probe -> verdict; evidence() explains the last non-alive verdict.
  Verdict judge(const HealthProbe& probe);
  [[nodiscard]] const std::string& evidence() const { return evidence_; }
  void reset();

 private:
  LivenessPolicy p_;
  int unanswered_ = 0;
  std::optional<HealthProbe> last_answer_;
  std::string evidence_;
};

}  // namespace spk
