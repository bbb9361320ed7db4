// Issue 43 item 7: response ids carry 128 random bits (no clock, no counter), on every route. A stored
// /v1/responses object is fetched by its id alone, so an id must not be guessable from ids seen before.
#include <gtest/gtest.h>
#include <httplib.h>

#include <array>
#include <cctype>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "runtime/serve/api_front.h"
#include "runtime/serve/http_server.h"
#include "tests/serve/live_server.h"

namespace spk::rt {
namespace {

using nlohmann::json;
const char* kKey = "test-key-123";

// "<prefix>" then exactly 32 lowercase hex digits.
bool well_formed(const std::string& id, const std::string& prefix) {
  if (id.rfind(prefix, 0) != 0 || id.size() != prefix.size() + 32) return false;
  for (size_t i = prefix.size(); i < id.size(); ++i)
    if (!std::isxdigit(static_cast<unsigned char>(id[i])) || std::isupper(static_cast<unsigned char>(id[i])))
      return false;
  return true;
}

TEST(WireId, Is128RandomBits) {
  constexpr int kN = 20000;
  std::set<std::string> seen;
  // Each of the 32 digit positions, over many ids, takes (nearly) all 16 values: a clock or a counter
  // leaves leading digits fixed across ids made in the same second.
  std::array<std::array<int, 16>, 32> hist{};
  for (int i = 0; i < kN; ++i) {
    const std::string id = make_wire_id("resp_");
    ASSERT_TRUE(well_formed(id, "resp_")) << id;
    ASSERT_TRUE(seen.insert(id).second) << "duplicate id " << id;
    for (int d = 0; d < 32; ++d) {
      const char c = id[5 + d];
      ++hist[d][c <= '9' ? c - '0' : c - 'a' + 10];
    }
  }
  for (int d = 0; d < 32; ++d)
    for (int v = 0; v < 16; ++v)
      // Expected kN/16 = 1250 each; a uniform source falls below 1000 with probability ~1e-13.
      EXPECT_GT(hist[d][v], 1000) << "digit " << d << " value " << v << ": ids are not uniformly random";
  // Two ids in a row differ in about half their 128 bits, not in a few low ones.
  const std::string a = make_wire_id(""), b = make_wire_id("");
  int differing = 0;
  for (int i = 0; i < 32; ++i) {
    const int x = std::stoi(a.substr(i, 1), nullptr, 16) ^ std::stoi(b.substr(i, 1), nullptr, 16);
    differing += __builtin_popcount(static_cast<unsigned>(x));
  }
  EXPECT_GT(differing, 20) << a << " vs " << b;
}

TEST(WireId, UniqueAcrossThreads) {
  std::array<std::vector<std::string>, 4> per;
  std::vector<std::thread> ts;
  for (auto& v : per)
    ts.emplace_back([&v] {
      for (int i = 0; i < 5000; ++i) v.push_back(make_wire_id("msg_"));
    });
  for (auto& t : ts) t.join();
  std::set<std::string> all;
  for (const auto& v : per) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), 20000u);
}

// Every route's response id, through the live server on loopback.
class WireIdServer : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpConfig hc;
    hc.served_model_name = "tiny";
    hc.api_key = kKey;
    live_.start(hc);
  }
  std::string id_of(const std::string& path, const std::string& body) {
    httplib::Client c = live_.client();
    auto r =
        c.Post(path, httplib::Headers{{"Authorization", std::string("Bearer ") + kKey}, {"x-api-key", kKey}},
               body, "application/json");
    EXPECT_TRUE(r) << path;
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
    auto j = json::parse(r->body, nullptr, false);
    return j.is_object() ? j.value("id", "") : "";
  }
  testing::LiveServer live_;
};

TEST_F(WireIdServer, EveryRouteUsesRandomIds) {
  const std::vector<std::tuple<std::string, std::string, std::string>> routes{
      {"/v1/completions", R"({"model":"tiny","prompt":"a","max_tokens":2})", "cmpl-"},
      {"/v1/chat/completions",
       R"({"model":"tiny","messages":[{"role":"user","content":"a"}],"max_tokens":2})", "chatcmpl-"},
      {"/v1/messages", R"({"model":"tiny","max_tokens":2,"messages":[{"role":"user","content":"a"}]})",
       "msg_"},
      {"/v1/responses", R"({"model":"tiny","input":"a","max_output_tokens":2})", "resp_"}};
  for (const auto& [path, body, prefix] : routes) {
    std::set<std::string> ids;
    for (int i = 0; i < 3; ++i) {
      const std::string id = id_of(path, body);
      EXPECT_TRUE(well_formed(id, prefix)) << path << ": " << id;
      ids.insert(id);
    }
    EXPECT_EQ(ids.size(), 3u) << path;
  }
}

}  // namespace
}  // namespace spk::rt
