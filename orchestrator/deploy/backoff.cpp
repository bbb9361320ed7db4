#include "orchestrator/deploy/backoff.h"

#include <algorithm>

namespace spk {

std::optional<std::chrono::milliseconds> RestartBackoff::on_failure(TimePoint now) {
  if (healthy_since_ && now - *healthy_since_ >= p_.reset_after) consecutive_ = 0;
  healthy_since_.reset();
  if (consecutive_ >= p_.give_up_after) return std::nullopt;
  // base * 2^consecutive, clamped; the shift is bounded so it cannot overflow.
  auto d = p_.base * (int64_t{1} << std::min(consecutive_, 30));
  ++consecutive_;
  ++total_;
  return std::min<std::chrono::milliseconds>(d, p_.cap);
}

void RestartBackoff::on_healthy(TimePoint now) {
  if (!healthy_since_) healthy_since_ = now;
}

}  // namespace spk
