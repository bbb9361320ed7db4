// Supervisor restart policy: backoff base (10 s) doubling to a cap (5 min); a deployment healthy for
// `reset_after` (10 min) since its last restart starts over at the base; after `give_up_after`
// restarts without such a reset the supervisor gives up. Time is passed in (injectable clock).
#pragma once

#include <chrono>
#include <optional>

namespace spk {

struct BackoffPolicy {
  std::chrono::milliseconds base{10'000};
  std::chrono::milliseconds cap{300'000};
  std::chrono::milliseconds reset_after{600'000};
  int give_up_after = 8;
};

class RestartBackoff {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;
  explicit RestartBackoff(BackoffPolicy p) : p_(p) {}

  // A failure seen at `now`: how long to wait before relaunching, or nullopt = give up.
  std::optional<std::chrono::milliseconds> on_failure(TimePoint now);
  // The relaunch at `now` came up healthy (starts the reset window).
  void on_healthy(TimePoint now);

  int consecutive() const { return consecutive_; }
  int total_restarts() const { return total_; }

 private:
  BackoffPolicy p_;
  int consecutive_ = 0;
  int total_ = 0;
  std::optional<TimePoint> healthy_since_;
};

}  // namespace spk
