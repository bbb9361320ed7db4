// Prometheus text exposition for /metrics under vLLM's metric names and labels (vllm:num_requests_running,
// vllm:kv_cache_usage_perc, vllm:prompt_tokens_total, vllm:time_to_first_token_seconds, ...; labels
// model_name and engine) where the meaning is the same, sparkctl_* for the rest: request counters by
// route and status, token counters,
// TTFT / inter-token-latency / end-to-end histograms, and gauges sampled at scrape time (KV usage,
// running and waiting sequences). Thread-safe: HTTP threads and the engine thread record concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace spk::rt {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1) {}
  void observe(double v);
  // Appends "<name>_bucket{<labels>,le=..}", "_sum{<labels>}", "_count{<labels>}" lines.
  void render(const std::string& name, const std::string& labels, std::string& out) const;
  [[nodiscard]] uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

struct Gauges {
  double kv_usage = 0;  // 0..1
  int running = 0;
  int waiting = 0;
  int kv_blocks_total = 0;
  uint64_t preemptions = 0;
};

class Metrics {
 public:
  Metrics();
  void request_done(const std::string& route, int status);
  void prompt_tokens(int n);
  void generation_tokens(int n);
  void ttft(double seconds);
  void itl(double seconds);
  void e2e(double seconds);
  // Prefix cache lookups (vLLM's vllm:prefix_cache_queries_total / _hits_total): prompt tokens queried
  // and tokens found cached, at each request's first admission.
  void prefix_cache(int queries, int hits);
  // Gauges are read from the engine when /metrics is scraped.
  void set_gauge_source(std::function<Gauges()> f);
  [[nodiscard]] std::string render(const std::string& model_name) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  uint64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  uint64_t prefix_queries_ = 0, prefix_hits_ = 0;
  Histogram ttft_, itl_, e2e_;
  std::function<Gauges()> gauges_;
};

}  // namespace spk::rt
