#include "orchestrator/deploy/liveness.h"

#include <httplib.h>

#include <cstdio>
#include <nlohmann/json.hpp>

namespace spk {

HealthProbe probe_health(const HttpEndpoint& ep, std::chrono::milliseconds timeout) {
  HealthProbe p;
  httplib::Client c(ep.host, ep.port);
  const auto s = std::chrono::duration_cast<std::chrono::seconds>(timeout).count();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(timeout).count() % 1000000;
  c.set_connection_timeout(s, us);
  c.set_read_timeout(s, us);
  c.set_write_timeout(s, us);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = c.Get("/health");
  p.latency_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!r) {
    p.error = httplib::to_string(r.error()) + " after " +
              std::to_string(static_cast<int>(p.latency_s * 1000)) + " ms";
    return p;
  }
  p.status = r->status;
  if (r->status != 200) {
    p.error = "HTTP " + std::to_string(r->status);
    return p;
  }
  p.answered = true;
  auto j = nlohmann::json::parse(r->body, nullptr, false);
  if (j.is_object() && j.contains("engine") && j["engine"].is_object()) {
    const auto& e = j["engine"];
    p.has_engine = true;
    p.steps = e.value("steps", uint64_t{0});
    p.idle = e.value("idle", true);
    p.stalled_ms = e.value("stalled_ms", int64_t{0});
    p.running = e.value("running", 0);
    p.waiting = e.value("waiting", 0);
  }
  return p;
}

void LivenessJudge::reset() {
  unanswered_ = 0;
  last_answer_.reset();
  evidence_.clear();
}

LivenessJudge::Verdict LivenessJudge::judge(const HealthProbe& probe) {
  char b[400];
  if (probe.answered) {
    unanswered_ = 0;
    const bool stalled = probe.has_engine && !probe.idle && probe.stalled_ms >= p_.stall_after.count();
    last_answer_ = probe;
    if (!stalled) return Verdict::alive;
    std::snprintf(b, sizeof b,
                  "engine stalled: no step completed for %.1f s with work pending (%d running, %d waiting, "
                  "%llu steps so far; limit %.0f s); /health itself answered in %.3f s",
                  static_cast<double>(probe.stalled_ms) / 1000.0, probe.running, probe.waiting,
                  static_cast<unsigned long long>(probe.steps),
                  static_cast<double>(p_.stall_after.count()) / 1000.0, probe.latency_s);
    evidence_ = b;
    return Verdict::hung;
  }
  ++unanswered_;
  std::string last = "never answered";
  if (last_answer_) {
    std::snprintf(b, sizeof b, "last answer: %llu steps, %s, stalled %.1f s",
                  static_cast<unsigned long long>(last_answer_->steps), last_answer_->idle ? "idle" : "busy",
                  static_cast<double>(last_answer_->stalled_ms) / 1000.0);
    last = b;
  }
  std::snprintf(b, sizeof b, "/health not answered %d poll(s) in a row (this one: %s; %s)", unanswered_,
                probe.error.c_str(), last.c_str());
  evidence_ = b;
  return unanswered_ >= p_.unanswered_polls ? Verdict::hung : Verdict::suspect;
}

}  // namespace spk
