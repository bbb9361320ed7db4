#include "runtime/serve/stats_logger.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace spk::rt {

namespace {

std::atomic<bool> g_access_on{false};  // off during the warmup before ready; on with the StatsLogger

// "name{labels} value" or "name value" -> value when the metric name matches.
bool value_of(const std::string& line, const std::string& name, double& out) {
  if (line.compare(0, name.size(), name) != 0) return false;
  const char next = line.size() > name.size() ? line[name.size()] : '\0';
  if (next != '{' && next != ' ') return false;
  const auto sp = line.rfind(' ');
  if (sp == std::string::npos) return false;
  out = std::strtod(line.c_str() + sp + 1, nullptr);
  return true;
}

}  // namespace

StatsSnapshot parse_stats(const std::string& text) {
  StatsSnapshot s;
  std::istringstream in(text);
  std::string line;
  double v = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (value_of(line, "vllm:prompt_tokens_total", v))
      s.prompt_tokens = static_cast<uint64_t>(v);
    else if (value_of(line, "vllm:generation_tokens_total", v))
      s.generation_tokens = static_cast<uint64_t>(v);
    else if (value_of(line, "sparkctl_requests_total", v) &&
             line.find("/v1/") != std::string::npos)  // API requests, not health checks or scrapes
      s.requests += static_cast<uint64_t>(v);
    else if (value_of(line, "vllm:kv_cache_usage_perc", v))
      s.kv_usage = v;
    else if (value_of(line, "vllm:num_requests_running", v))
      s.running = static_cast<int>(v);
    else if (value_of(line, "vllm:num_requests_waiting", v))
      s.waiting = static_cast<int>(v);
    else if (value_of(line, "vllm:prefix_cache_queries_total", v))
      s.prefix_queries = static_cast<uint64_t>(v);
    else if (value_of(line, "vllm:prefix_cache_hits_total", v))
      s.prefix_hits = static_cast<uint64_t>(v);
  }
  return s;
}

std::string stats_line(const StatsSnapshot& prev, const StatsSnapshot& now, double seconds) {
  const double dt = seconds > 0 ? seconds : 1;
  const double hit_rate =
      now.prefix_queries > 0 ? 100.0 * double(now.prefix_hits) / double(now.prefix_queries) : 0.0;
  char b[384];
  std::snprintf(b, sizeof b,
                "Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, Running: %d "
                "reqs, Waiting: %d reqs, KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%, Requests: "
                "%llu total",
                double(now.prompt_tokens - prev.prompt_tokens) / dt,
                double(now.generation_tokens - prev.generation_tokens) / dt, now.running, now.waiting,
                now.kv_usage * 100.0, hit_rate, static_cast<unsigned long long>(now.requests));
  return b;
}

std::string access_line(uint64_t id, int prompt_tokens, int generated_tokens, double seconds,
                        const char* finish, const std::string& error) {
  char b[160];
  std::snprintf(b, sizeof b, "request %llu done: %d prompt + %d generated tokens in %.2f s (finish %s",
                static_cast<unsigned long long>(id), prompt_tokens, generated_tokens, seconds,
                error.empty() ? finish : "error");
  return std::string(b) + (error.empty() ? ")" : ": " + error + ")");
}

void log_access(uint64_t id, int prompt_tokens, int generated_tokens, double seconds, const char* finish,
                const std::string& error) {
  if (!g_access_on.load(std::memory_order_relaxed)) return;
  spdlog::info("{}", access_line(id, prompt_tokens, generated_tokens, seconds, finish, error));
}

StatsLogger::StatsLogger(const Metrics& metrics, std::string model, std::chrono::milliseconds interval)
    : metrics_(metrics), model_(std::move(model)), interval_(interval) {
  if (interval_.count() <= 0) {
    const char* e = std::getenv("SPARKCTL_STATS_INTERVAL_S");
    const double s = e && *e ? std::strtod(e, nullptr) : 10.0;
    interval_ = std::chrono::milliseconds(static_cast<int64_t>((s > 0 ? s : 10.0) * 1000));
  }
  g_access_on = true;
  thread_ = std::thread([this] { run(); });
}

StatsLogger::~StatsLogger() {
  g_access_on = false;
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StatsLogger::run() {
  StatsSnapshot prev = parse_stats(metrics_.render(model_));
  auto t_prev = std::chrono::steady_clock::now();
  bool idle_logged = false;
  std::unique_lock l(mu_);
  while (!cv_.wait_for(l, interval_, [this] { return stop_; })) {
    const StatsSnapshot now = parse_stats(metrics_.render(model_));
    const auto t = std::chrono::steady_clock::now();
    const bool idle = now.prompt_tokens == prev.prompt_tokens &&
                      now.generation_tokens == prev.generation_tokens && now.running == 0 && now.waiting == 0;
    if (!idle || !idle_logged)  // like vLLM: quiet while nothing happens (after saying so once)
      spdlog::info("{}", stats_line(prev, now, std::chrono::duration<double>(t - t_prev).count()));
    idle_logged = idle;
    prev = now;
    t_prev = t;
  }
}

}  // namespace spk::rt
