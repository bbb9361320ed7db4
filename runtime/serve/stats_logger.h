// What an operator watches in the rank-0 log, the way vLLM prints it:
//   every interval (10 s; $SPARKCTL_STATS_INTERVAL_S) while serving:
//     "Avg prompt throughput: 120.4 tokens/s, Avg generation throughput: 31.2 tokens/s, Running: 2 reqs,
//      Waiting: 0 reqs, KV cache usage: 12.5%, Prefix cache hit rate: 48.0%, Requests: 14 total"
//   (the hit rate: prompt tokens found cached / prompt tokens looked up, since start; vLLM shows it over
//   its last 1000 requests, the same number until then)
//   (no line while idle after one idle line), and one access line per finished request:
//     "request 17 done: 25 prompt + 16 generated tokens in 0.82 s (finish length)"
// The periodic line reads only Metrics (its Prometheus text), so it costs the engine nothing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/serve/metrics.h"

namespace spk::rt {

// Counters and gauges read back from Metrics::render's text.
struct StatsSnapshot {
  uint64_t prompt_tokens = 0, generation_tokens = 0, requests = 0;
  uint64_t prefix_queries = 0, prefix_hits = 0;
  double kv_usage = 0;  // 0..1
  int running = 0, waiting = 0;
};
StatsSnapshot parse_stats(const std::string& prometheus_text);

// The periodic line for `seconds` between two snapshots.
std::string stats_line(const StatsSnapshot& prev, const StatsSnapshot& now, double seconds);

// The access line of one finished request (logged through spdlog at info).
std::string access_line(uint64_t id, int prompt_tokens, int generated_tokens, double seconds,
                        const char* finish, const std::string& error);
// No-op unless a StatsLogger exists (so the warmup before ready logs no access lines).
void log_access(uint64_t id, int prompt_tokens, int generated_tokens, double seconds, const char* finish,
                const std::string& error);

class StatsLogger {
 public:
  // Starts the thread; `interval` <= 0 reads $SPARKCTL_STATS_INTERVAL_S (default 10 s).
  StatsLogger(const Metrics& metrics, std::string model, std::chrono::milliseconds interval = {});
  ~StatsLogger();
  StatsLogger(const StatsLogger&) = delete;
  StatsLogger& operator=(const StatsLogger&) = delete;

 private:
  void run();
  const Metrics& metrics_;
  std::string model_;
  std::chrono::milliseconds interval_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace spk::rt
