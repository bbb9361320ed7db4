// The operator's periodic line and access line (runtime/serve/stats_logger.h), from real Metrics text.
#include "runtime/serve/stats_logger.h"

#include <gtest/gtest.h>

namespace spk::rt {
namespace {

TEST(StatsLogger, ReadsCountersAndGaugesBackFromMetrics) {
  Metrics m;
  m.set_gauge_source([] {
    Gauges g;
    g.kv_usage = 0.25;
    g.running = 3;
    g.waiting = 1;
    return g;
  });
  const StatsSnapshot before = parse_stats(m.render("demo"));
  m.prompt_tokens(200);
  m.generation_tokens(50);
  m.request_done("/v1/chat/completions", 200);
  m.request_done("/v1/completions", 400);
  m.request_done("/health", 200);  // not an API request
  m.prefix_cache(200, 64);
  const StatsSnapshot now = parse_stats(m.render("demo"));
  EXPECT_EQ(now.prompt_tokens, 200u);
  EXPECT_EQ(now.generation_tokens, 50u);
  EXPECT_EQ(now.requests, 2u);
  EXPECT_EQ(now.running, 3);
  EXPECT_EQ(now.waiting, 1);
  EXPECT_DOUBLE_EQ(now.kv_usage, 0.25);
  EXPECT_EQ(now.prefix_queries, 200u);
  EXPECT_EQ(now.prefix_hits, 64u);
  EXPECT_EQ(stats_line(before, now, 10.0),
            "Avg prompt throughput: 20.0 tokens/s, Avg generation throughput: 5.0 tokens/s, Running: 3 reqs, "
            "Waiting: 1 reqs, KV cache usage: 25.0%, Prefix cache hit rate: 32.0%, Requests: 2 total");
  EXPECT_NE(stats_line(before, before, 10.0).find("Prefix cache hit rate: 0.0%"), std::string::npos);
}

TEST(StatsLogger, AccessLineNamesTokensTimeAndFinish) {
  EXPECT_EQ(access_line(17, 25, 16, 0.8234, "length", ""),
            "request 17 done: 25 prompt + 16 generated tokens in 0.82 s (finish length)");
  EXPECT_EQ(access_line(3, 5, 0, 0.01, "none", "aborted"),
            "request 3 done: 5 prompt + 0 generated tokens in 0.01 s (finish error: aborted)");
}

}  // namespace
}  // namespace spk::rt
