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

void Histogram::render(const std::string& name, const std::string& labels, std::string& out) const {
  const std::string pre = labels.empty() ? "" : labels + ",";
  const std::string lbl = labels.empty() ? "" : "{" + labels + "}";
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{" + pre + "le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  out += name + "_bucket{" + pre + "le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum" + lbl + " " + num(sum_) + "\n";
  out += name + "_count" + lbl + " " + std::to_string(count_) + "\n";
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
  // vLLM's names and labels where the meaning is the same (dashboards built for vLLM read them as they
  // are); what only sparkctl reports keeps the sparkctl_ prefix.
  const std::string labels = "model_name=\"" + model + "\",engine=\"0\"";
  const std::string lbl = "{" + labels + "}";
  std::string o;
  auto head = [&o](const char* name, const char* type, const char* help) {
    o += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  auto line = [&o, &lbl](const char* name, const std::string& v) { o += name + lbl + " " + v + "\n"; };
  head("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.");
  line("vllm:num_requests_running", std::to_string(g.running));
  head("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  line("vllm:num_requests_waiting", std::to_string(g.waiting));
  head("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  line("vllm:kv_cache_usage_perc", num(g.kv_usage));
  head("vllm:num_preemptions_total", "counter", "Cumulative number of preemptions from the engine.");
  line("vllm:num_preemptions_total", std::to_string(g.preemptions));
  head("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.");
  line("vllm:prompt_tokens_total", std::to_string(prompt_tokens_));
  head("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.");
  line("vllm:generation_tokens_total", std::to_string(generation_tokens_));
  // Tokens, counted at each request's first admission (as vLLM: preempted re-admissions are not queries).
  head("vllm:prefix_cache_queries_total", "counter",
       "Prefix cache queries, in terms of number of queried tokens.");
  line("vllm:prefix_cache_queries_total", std::to_string(prefix_queries_));
  head("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.");
  line("vllm:prefix_cache_hits_total", std::to_string(prefix_hits_));
  head("vllm:time_to_first_token_seconds", "histogram", "Histogram of time to first token in seconds.");
  ttft_.render("vllm:time_to_first_token_seconds", labels, o);
  head("vllm:inter_token_latency_seconds", "histogram", "Histogram of inter-token latency in seconds.");
  itl_.render("vllm:inter_token_latency_seconds", labels, o);
  head("vllm:e2e_request_latency_seconds", "histogram", "Histogram of e2e request latency in seconds.");
  e2e_.render("vllm:e2e_request_latency_seconds", labels, o);
  head("sparkctl_requests_total", "counter", "HTTP requests by route and status code.");
  for (const auto& [k, v] : requests_)
    o += "sparkctl_requests_total{model_name=\"" + model + "\",route=\"" + k.first + "\",status=\"" +
         std::to_string(k.second) + "\"} " + std::to_string(v) + "\n";
  head("sparkctl_kv_cache_blocks", "gauge", "Blocks in the KV pool.");
  line("sparkctl_kv_cache_blocks", std::to_string(g.kv_blocks_total));
  return o;
}

}  // namespace spk::rt
