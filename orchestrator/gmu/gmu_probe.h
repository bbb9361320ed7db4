// The seam between GMU bisection and the runtime it measures. A probe answers two questions about one
// gpu-memory-utilization value G: what the memory planner predicts (`--dry-run-memory`: no boot,
// seconds) and what a real boot does (start, wait for readiness, read the KV size, stop). Tests swap in
// a fake node whose boots fail above a threshold; the CLI uses ProcessProbe (process_probe.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/base/status.h"

namespace spk {

// The planner's answer at one G. `ok` false = the planner refused (shortfall); `error` is its message.
struct DryRun {
  double gmu = 0;
  bool ok = false;
  std::string error;
  uint64_t device_bytes = 0;
  int64_t available_kv_bytes = 0;
  int64_t kv_tokens = 0;
  uint64_t kv_bytes_per_token = 0;
  int block_size = 16;
  int max_model_len = 0;
};

enum class BootKind {
  booted,          // readiness reached; kv_tokens read from its log
  clean_too_high,  // exited with the planner's shortfall message: safe, climb no further
  dangerous,       // killed, OOM, timeout, crash, or any other failure: stop climbing at once
};
const char* boot_kind_name(BootKind k);

struct BootResult {
  BootKind kind = BootKind::dangerous;
  int64_t kv_tokens = 0;
  std::string detail;  // the failure's message or log tail; empty when booted
  double seconds = 0;
};

class GmuProbe {
 public:
  virtual ~GmuProbe() = default;
  // Err only when the probe itself cannot run (binary missing, unparsable output); a planner refusal is
  // an ok Result with DryRun::ok == false.
  virtual Result<DryRun> dry_run(double gmu) = 0;
  virtual BootResult boot(double gmu) = 0;
  // MemAvailable of the node in bytes (/proc/meminfo), nullopt when unknown.
  virtual std::optional<uint64_t> mem_available() = 0;
};

// True when `message` is the memory planner's clean refusal (runtime/serve/memory_planner.cpp):
// "KV cache memory budget is negative: short by X GiB" or "KV cache holds N tokens ... less than one
// request of max_model_len".
bool is_planner_shortfall(const std::string& message);

}  // namespace spk
