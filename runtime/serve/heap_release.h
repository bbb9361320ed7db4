// Giving a finished burst's memory back (issue 43 item 6). glibc's malloc hands each contending thread an
// arena of its own (up to 8 per core) and returns freed memory to the OS only from the top of a heap: a
// 1 MiB /v1/messages body parses into ~20 MiB of small JSON nodes on a handler thread, and 16 such
// requests at once left +335 MiB resident after they were done (tests/serve/heap_release_test.cpp), GBs
// after 300 of 4 MB. With the memory floor (mem_floor_gib) that can stop a rank for traffic that is over.
//
// Two measures: the server bounds the number of arenas at start (fewer heaps to strand memory in; a bound
// set by the user through MALLOC_ARENA_MAX is left alone), and after a large request the heap is trimmed
// (malloc_trim(0): every arena's free pages go back, not only its top) once no other large request is in
// flight, or at most once a second while they keep overlapping. A trim walks the free lists: ~1-10 ms
// for a few hundred MiB, paid only after requests of at least `threshold` bytes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace spk::rt {

// M_ARENA_MAX = max_arenas (> 0) unless MALLOC_ARENA_MAX is set; returns the bound in force, 0 when
// glibc's default stays (max_arenas <= 0, or not glibc).
int bound_malloc_arenas(int max_arenas);

class HeapTrimmer {
 public:
  explicit HeapTrimmer(size_t threshold = 256u << 10,
                       std::chrono::milliseconds min_interval = std::chrono::milliseconds(1000))
      : threshold_(threshold), min_interval_(min_interval) {}

  // Held around one request: a large one counts as in flight until the scope ends.
  class Scope {
   public:
    Scope(HeapTrimmer* t, bool large) : t_(large ? t : nullptr) {
      if (t_) t_->inflight_.fetch_add(1);
    }
    ~Scope() {
      if (t_) t_->large_done();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    HeapTrimmer* t_;
  };
  [[nodiscard]] Scope track(size_t request_bytes) { return Scope(this, request_bytes >= threshold_); }
  [[nodiscard]] uint64_t trims() const { return trims_.load(); }

 private:
  void large_done();
  size_t threshold_;
  std::chrono::milliseconds min_interval_;
  std::atomic<int> inflight_{0};
  std::mutex trim_mu_;  // one trim at a time; the last large request waits its turn, never skips
  std::atomic<int64_t> last_trim_ns_{0};
  std::atomic<uint64_t> trims_{0};
};

}  // namespace spk::rt
