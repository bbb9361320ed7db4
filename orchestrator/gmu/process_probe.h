// ProcessProbe: the real GmuProbe on the local node. Runs the lane's rank-0 runtime argv (from the plan)
// with --gpu-memory-utilization G: `--dry-run-memory` for the planner's JSON, and for a boot the daemon
// itself on --port 0 with a throwaway API key, its log under log_dir, until its readiness line (printed
// only after a real token) or its exit; the KV size comes from the planner's "KV cache size: N tokens"
// log line; then SIGTERM (SIGKILL after 10 s). Exit with the planner's shortfall message = clean too
// high; any other exit, a signal or the timeout = dangerous.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "orchestrator/gmu/gmu_probe.h"

namespace spk {

struct ProcessProbeOptions {
  std::vector<std::string> argv;  // rank-0 argv; argv[0] is the binary to exec
  std::string log_dir;            // boot logs: <log_dir>/boot-<G>.log
  std::chrono::seconds boot_timeout{600};
  std::string meminfo_path = "/proc/meminfo";
};

class ProcessProbe final : public GmuProbe {
 public:
  explicit ProcessProbe(ProcessProbeOptions opt) : opt_(std::move(opt)) {}
  Result<DryRun> dry_run(double gmu) override;
  BootResult boot(double gmu) override;
  std::optional<uint64_t> mem_available() override;

 private:
  [[nodiscard]] std::vector<std::string> argv_at(double gmu) const;
  ProcessProbeOptions opt_;
};

// argv with the value after `flag` replaced (appended as `flag value` when absent).
std::vector<std::string> with_flag(std::vector<std::string> argv, const std::string& flag,
                                   const std::string& value);

// Runs argv (no shell) to its end, output into `log`; Err names the exit status and the log.
Status run_logged(const std::vector<std::string>& argv, const std::string& log);

// MemAvailable in bytes from /proc/meminfo text; nullopt when absent.
std::optional<uint64_t> parse_mem_available(const std::string& meminfo);

}  // namespace spk
