// Issue 43 item 3: the front thread does no work proportional to stored data. 64 clients reading back one
// ~4 MB stored response (GET /v1/responses/{id}) kept /health past 5 s when the front thread copied and
// wrote each answer itself; the store's reads now run on handler threads, and /health and /metrics,
// answered on the front thread, stay fast beside them.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/serve/live_server.h"
#include "tests/serve/wire_load.h"

namespace spk::rt {
namespace {

using nlohmann::json;

using spk::test::Latency;

// A stored response of about `bytes` (it echoes the request's unused tools); its id, "" on failure.
std::string store_large_response(const testing::LiveServer& live, size_t bytes) {
  auto r = live.client("k").Post("/v1/responses", spk::test::large_responses_body("tiny", bytes),
                                 "application/json");
  if (!r || r->status != 200) return "";
  return json::parse(r->body)["id"];
}

Latency probe(const testing::LiveServer& live, const std::string& path, int probes) {
  return spk::test::probe(live.port(), path, "k", probes);
}

TEST(FrontThread, HealthAndMetricsStayFastBesideReadsOfALargeStoredResponse) {
  testing::LiveServer live;
  HttpConfig hc;
  hc.api_key = "k";
  hc.served_model_name = "tiny";
  hc.max_body_bytes = 8u << 20;
  live.start(hc);
  const std::string id = store_large_response(live, 4u << 20);
  ASSERT_FALSE(id.empty());
  const Latency idle = probe(live, "/health", 5);

  const auto load = spk::test::probe_beside_stored_reads(live.port(), "k", id, 4u << 20);
  const Latency &health = load.health, &metrics = load.metrics;
  std::printf(
      "/health %.1f ms idle; beside 64 readers of a 4 MiB response (%d reads), median/worst: "
      "/health %.1f/%.1f ms, /metrics %.1f/%.1f ms\n",
      idle.median_ms, load.reads, health.median_ms, health.worst_ms, metrics.median_ms, metrics.worst_ms);
  expect_probes_unhurt(load);
}

}  // namespace
}  // namespace spk::rt
