// Issue 43 item 2: the /v1/responses store is bounded by bytes, not only by count: a response that
// echoes 1,000s of unused tools counts its serialised size, the least recently used go first, one
// larger than the whole budget is not kept, and /metrics shows the store's size.
#include "runtime/serve/response_store.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <thread>

#include "runtime/serve/http_server.h"
#include "tests/serve/live_server.h"

namespace spk::rt {
namespace {

using nlohmann::json;

StoredResponse sized(size_t n) {
  return StoredResponse{std::string(n, 'x'), nlohmann::ordered_json::array()};
}

TEST(ResponseStoreBytes, EvictsLeastRecentlyUsedByBytes) {
  ResponseStore s(100, 10000);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(s.put("r" + std::to_string(i), sized(3000)));
  EXPECT_LE(s.bytes(), 10000u);
  EXPECT_EQ(s.size(), 3u);  // 3 x ~3,070 bytes fit, 4 do not
  EXPECT_FALSE(s.get("r0"));
  EXPECT_FALSE(s.get("r1"));
  EXPECT_TRUE(s.get("r2"));  // now the most recently used
  EXPECT_TRUE(s.put("r5", sized(3000)));
  EXPECT_TRUE(s.get("r2")) << "a use keeps an entry";
  EXPECT_FALSE(s.get("r3"));
  const auto st = s.stats();
  EXPECT_EQ(st.evicted, 3u);
  EXPECT_EQ(st.entries, 3u);
  EXPECT_EQ(st.bytes, s.bytes());
  EXPECT_EQ(st.max_bytes, 10000u);
}

TEST(ResponseStoreBytes, LargerThanTheBudgetIsNotKept) {
  ResponseStore s(100, 10000);
  EXPECT_TRUE(s.put("small", sized(100)));
  EXPECT_FALSE(s.put("huge", sized(20000)));
  EXPECT_FALSE(s.get("huge"));
  EXPECT_TRUE(s.get("small")) << "a refused entry evicts nothing";
  EXPECT_EQ(s.stats().refused, 1u);
  // Replacing an id replaces its bytes.
  EXPECT_TRUE(s.put("small", sized(5000)));
  EXPECT_EQ(s.size(), 1u);
  EXPECT_LT(s.bytes(), 5200u);
}

TEST(ResponseStoreBytes, CountStillBounds) {
  ResponseStore s(2, 1 << 20);
  for (const char* id : {"a", "b", "c"}) s.put(id, sized(10));
  EXPECT_EQ(s.size(), 2u);
  EXPECT_FALSE(s.get("a"));
}

TEST(ResponseStoreBytes, ConversationCounts) {
  ResponseStore s(10, 1 << 20);
  StoredResponse r{"{}", nlohmann::ordered_json::array()};
  r.conversation.push_back({{"role", "user"}, {"content", std::string(100000, 'c')}});
  s.put("a", std::move(r));
  EXPECT_GT(s.bytes(), 100000u);
}

// Through the live server: stored responses that each echo ~200 KB of unused tools stay within a
// 1 MiB budget; /metrics reports entries, bytes and evictions; GET serves the newest, 404s the evicted.
class StoreServer : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpConfig hc;
    hc.served_model_name = "tiny";
    hc.api_key = "k";
    hc.max_stored_response_bytes = 1u << 20;
    live_.start(hc);
  }
  httplib::Client client() { return live_.client("k"); }
  double metric(const std::string& text, const std::string& name) {
    const auto at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1 : std::stod(text.substr(at + name.size() + 2));
  }
  testing::LiveServer live_;
};

TEST_F(StoreServer, UnusedToolsCountAgainstTheByteBudget) {
  json tools = json::array();
  for (int i = 0; i < 2500; ++i)
    tools.push_back({{"type", "function"},
                     {"name", "tool_" + std::to_string(i)},
                     {"description", "an unused tool"},
                     {"parameters", {{"type", "object"}}}});
  const json body{{"model", "tiny"}, {"input", "hi"},         {"max_output_tokens", 2},
                  {"store", true},   {"tool_choice", "none"}, {"tools", tools}};
  const std::string text = body.dump();
  ASSERT_GT(text.size(), 200000u);
  std::vector<std::string> ids;
  for (int i = 0; i < 12; ++i) {
    auto r = client().Post("/v1/responses", text, "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body.substr(0, 500);
    ids.push_back(json::parse(r->body)["id"]);
  }
  auto m = client().Get("/metrics");
  ASSERT_TRUE(m);
  const double stored = metric(m->body, "sparkctl_responses_stored");
  const double bytes = metric(m->body, "sparkctl_responses_stored_bytes");
  EXPECT_GE(stored, 1) << m->body;
  EXPECT_LE(stored, 5) << m->body;
  EXPECT_GT(bytes, 200000) << "the echoed tools count: " << m->body;
  EXPECT_LE(bytes, 1 << 20) << m->body;
  EXPECT_EQ(metric(m->body, "sparkctl_responses_store_max_bytes"), 1 << 20) << m->body;
  EXPECT_EQ(metric(m->body, "sparkctl_responses_evicted_total"), 12 - stored) << m->body;
  auto newest = client().Get("/v1/responses/" + ids.back());
  ASSERT_TRUE(newest);
  EXPECT_EQ(newest->status, 200);
  EXPECT_EQ(json::parse(newest->body)["tools"].size(), 2500u);
  auto oldest = client().Get("/v1/responses/" + ids.front());
  ASSERT_TRUE(oldest);
  EXPECT_EQ(oldest->status, 404);
  EXPECT_NE(oldest->body.find("within 1 MiB"), std::string::npos) << oldest->body;
}

}  // namespace
}  // namespace spk::rt
