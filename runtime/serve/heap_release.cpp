#include "runtime/serve/heap_release.h"

#include <cstdlib>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace spk::rt {

int bound_malloc_arenas(int max_arenas) {
#if defined(__GLIBC__)
  if (const char* env = std::getenv("MALLOC_ARENA_MAX"); env && *env) return std::atoi(env);
  if (max_arenas <= 0) return 0;
  return ::mallopt(M_ARENA_MAX, max_arenas) == 1 ? max_arenas : 0;
#else
  (void)max_arenas;
  return 0;
#endif
}

void HeapTrimmer::large_done() {
  const bool last = inflight_.fetch_sub(1) == 1;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  const bool due = now - last_trim_ns_.load() >=
                   std::chrono::duration_cast<std::chrono::nanoseconds>(min_interval_).count();
  if (!last && !due) return;
  // A periodic trim skips when one is running; the last one of a burst waits, since memory freed after
  // the running trim started is not covered by it.
  std::unique_lock lk(trim_mu_, std::defer_lock);
  if (last)
    lk.lock();
  else if (!lk.try_lock())
    return;
#if defined(__GLIBC__)
  ::malloc_trim(0);
#endif
  last_trim_ns_.store(now);
  trims_.fetch_add(1);
}

}  // namespace spk::rt
