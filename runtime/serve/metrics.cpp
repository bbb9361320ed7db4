#include "runtime/serve/metrics.h"

#include <algorithm>
#include <cstdio>

namespace spk::rt {

namespace {

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

}  // namespace

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, std::string& out) const {
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + num(sum_) + "\n";
  out += name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttft_(
          {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}),
      itl_({0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 10}),
      e2e_({0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480}) {}

void Metrics::request_done(const std::string& route, int status) {
  std::lock_guard l(mu_);
  ++requests_[{route, status}];
}
void Metrics::prompt_tokens(int n) {
  std::lock_guard l(mu_);
  prompt_tokens_ += static_cast<uint64_t>(n);
}
void Metrics::generation_tokens(int n) {
  std::lock_guard l(mu_);
  generation_tokens_ += static_cast<uint64_t>(n);
}
void Metrics::ttft(double s) {
  std::lock_guard l(mu_);
  ttft_.observe(s);
}
void Metrics::itl(double s) {
  std::lock_guard l(mu_);
  itl_.observe(s);
}
void Metrics::e2e(double s) {
  std::lock_guard l(mu_);
  e2e_.observe(s);
}
void Metrics::prefix_cache(int queries, int hits) {
  std::lock_guard l(mu_);
  prefix_queries_ += static_cast<uint64_t>(std::max(queries, 0));
  prefix_hits_ += static_cast<uint64_t>(std::max(hits, 0));
}
void Metrics::set_gauge_source(std::function<Gauges()> f) {
  std::lock_guard l(mu_);
  gauges_ = std::move(f);
}

std::string Metrics::render(const std::string& model) const {
  std::function<Gauges()> gsrc;
  {
    std::lock_guard l(mu_);
    gsrc = gauges_;
  }
  Gauges g = gsrc ? gsrc() : Gauges{};  // outside mu_: the source takes the engine's lock
  std::lock_guard l(mu_);
  const std::string lbl = "{model_name=\"" + model + "\"}";
  std::string o;
  o += "# HELP sparkctl_requests_total HTTP requests by route and status code.\n";
  o += "# TYPE sparkctl_requests_total counter\n";
  for (const auto& [k, v] : requests_)
    o += "sparkctl_requests_total{model_name=\"" + model + "\",route=\"" + k.first + "\",status=\"" +
         std::to_string(k.second) + "\"} " + std::to_string(v) + "\n";
  o += "# HELP sparkctl_prompt_tokens_total Prompt tokens of admitted requests.\n";
  o += "# TYPE sparkctl_prompt_tokens_total counter\n";
  o += "sparkctl_prompt_tokens_total" + lbl + " " + std::to_string(prompt_tokens_) + "\n";
  o += "# HELP sparkctl_generation_tokens_total Generated tokens.\n";
  o += "# TYPE sparkctl_generation_tokens_total counter\n";
  o += "sparkctl_generation_tokens_total" + lbl + " " + std::to_string(generation_tokens_) + "\n";
  o += "# HELP sparkctl_time_to_first_token_seconds Arrival to first generated token.\n";
  o += "# TYPE sparkctl_time_to_first_token_seconds histogram\n";
  ttft_.render("sparkctl_time_to_first_token_seconds", o);
  o += "# HELP sparkctl_inter_token_latency_seconds Time between consecutive tokens of a sequence.\n";
  o += "# TYPE sparkctl_inter_token_latency_seconds histogram\n";
  itl_.render("sparkctl_inter_token_latency_seconds", o);
  o += "# HELP sparkctl_e2e_request_latency_seconds Arrival to last token.\n";
  o += "# TYPE sparkctl_e2e_request_latency_seconds histogram\n";
  e2e_.render("sparkctl_e2e_request_latency_seconds", o);
  o += "# HELP sparkctl_kv_cache_usage_ratio Fraction of KV blocks in use (0..1).\n";
  o += "# TYPE sparkctl_kv_cache_usage_ratio gauge\n";
  o += "sparkctl_kv_cache_usage_ratio" + lbl + " " + num(g.kv_usage) + "\n";
  o += "# HELP sparkctl_kv_cache_blocks Blocks in the KV pool.\n";
  o += "# TYPE sparkctl_kv_cache_blocks gauge\n";
  o += "sparkctl_kv_cache_blocks" + lbl + " " + std::to_string(g.kv_blocks_total) + "\n";
  o += "# HELP sparkctl_num_requests_running Sequences in the running batch.\n";
  o += "# TYPE sparkctl_num_requests_running gauge\n";
  o += "sparkctl_num_requests_running" + lbl + " " + std::to_string(g.running) + "\n";
  o += "# HELP sparkctl_num_requests_waiting Sequences queued (incl. preempted).\n";
  o += "# TYPE sparkctl_num_requests_waiting gauge\n";
  o += "sparkctl_num_requests_waiting" + lbl + " " + std::to_string(g.waiting) + "\n";
  o += "# HELP sparkctl_preemptions_total Sequences preempted (recompute) for lack of KV blocks.\n";
  o += "# TYPE sparkctl_preemptions_total counter\n";
  o += "sparkctl_preemptions_total" + lbl + " " + std::to_string(g.preemptions) + "\n";
  // vLLM's prefix cache counters (tokens, counted at each request's first admission).
  const std::string vlbl = "{model_name=\"" + model + "\",engine=\"0\"}";
  o += "# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.\n";
  o += "# TYPE vllm:prefix_cache_queries_total counter\n";
  o += "vllm:prefix_cache_queries_total" + vlbl + " " + std::to_string(prefix_queries_) + "\n";
  o += "# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.\n";
  o += "# TYPE vllm:prefix_cache_hits_total counter\n";
  o += "vllm:prefix_cache_hits_total" + vlbl + " " + std::to_string(prefix_hits_) + "\n";
  return o;
}

}  // namespace spk::rt
