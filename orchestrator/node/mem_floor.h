// The node's memory floor. A GB10 host shares its 128 GB between CPU and GPU; when MemAvailable runs out
// it wedges (the desktop, sshd and the driver stall) instead of failing an allocation. So every runtime
// rank watches its own node's MemAvailable from the moment it starts (weight loading included) and, when
// it stays below the floor the recipe sets (`mem_floor_gib`, runtime flag `--mem-floor-gib`) for
// `samples` reads in a row, stops the engine itself and leaves an exit note saying why.
//
// Exit notes: a daemon that ends on purpose writes {"reason", "message", "ts_ms"} to the path
// `node launch` gives it in $SPARKCTL_EXIT_NOTE (<run dir>/<name>.exit). `node ps` reports the note of a
// dead daemon, and the supervisor does not restart a rank that stopped at its memory floor (the same
// launch would meet the same floor); `status` shows the note's message.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "kernels/base/status.h"

namespace spk {

inline constexpr const char* kExitNoteEnv = "SPARKCTL_EXIT_NOTE";
inline constexpr const char* kMemFloorReason = "mem_floor";

struct MemFloorOptions {
  uint64_t floor_bytes = 0;  // 0 = off
  std::string meminfo_path = "/proc/meminfo";
  std::chrono::milliseconds period{500};
  int samples = 2;  // consecutive reads below the floor before acting (one low read can be a blip)
};

// The verdict for one MemAvailable reading; `low_streak` counts consecutive low reads.
struct MemFloorJudge {
  explicit MemFloorJudge(MemFloorOptions o) : opt(std::move(o)) {}
  // True when this reading completes a breach (low for opt.samples reads in a row).
  bool observe(uint64_t available_bytes);
  [[nodiscard]] std::string message(uint64_t available_bytes) const;
  MemFloorOptions opt;
  int low_streak = 0;
};

// Reads MemAvailable every period on its own thread and calls on_breach(message) once, on breach.
// An unreadable meminfo is logged once and the watch goes on (it may be a transient failure).
class MemFloorWatch {
 public:
  using Breach = std::function<void(const std::string& message)>;
  MemFloorWatch(MemFloorOptions opt, Breach on_breach);
  ~MemFloorWatch();
  MemFloorWatch(const MemFloorWatch&) = delete;
  MemFloorWatch& operator=(const MemFloorWatch&) = delete;

 private:
  void loop();
  MemFloorJudge judge_;
  Breach on_breach_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// Writes the exit note to $SPARKCTL_EXIT_NOTE when it is set (atomically); ok when unset.
Status write_exit_note(const std::string& reason, const std::string& message);

// The exit-note path of daemon `name` in run dir `dir`.
std::string exit_note_path(const std::string& dir, const std::string& name);

}  // namespace spk
