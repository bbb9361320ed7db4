// Prefix caching as clients see it, over real HTTP against the hash fake model (fakes.h): the second
// request of a conversation that resends the same long system prompt reports the cached prompt tokens in
// every front's usage (chat/completions and completions: usage.prompt_tokens_details.cached_tokens,
// streamed usage chunk included; /v1/messages: cache_read_input_tokens with input_tokens the rest;
// /v1/responses: input_tokens_details.cached_tokens), and /metrics counts vLLM's prefix cache counters.
#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "runtime/serve/http_server.h"
#include "tests/serve/live_server.h"

namespace spk::rt {
namespace {

using nlohmann::json;

class ServePrefixCache : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineConfig ec = testing::LiveServer::engine_config();
    ec.sched = {8, 256};
    ec.max_model_len = 1024;
    HttpConfig hc;
    hc.served_model_name = "tiny";
    hc.api_key = "k";
    live_.start(hc, ec);
  }
  std::string raw(const std::string& path, const json& body, const httplib::Headers& h = {}) {
    httplib::Client c("127.0.0.1", live_.server->port());
    c.set_read_timeout(30, 0);
    c.set_bearer_token_auth("k");
    auto r = c.Post(path.c_str(), h, body.dump(), "application/json");
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, 200) << r->body;
    return r->body;
  }
  json post(const std::string& path, const json& body, const httplib::Headers& h = {}) {
    return json::parse(raw(path, body, h), nullptr, false);
  }

  testing::LiveServer live_;
};

std::string system_prompt() {
  std::string s = "You are an agent. Tools:";
  for (int i = 0; i < 30; ++i) s += " tool_" + std::to_string(i) + "(path);";
  return s;  // ~330 bytes = tokens of the byte tokenizer
}

json chat(const std::string& question) {
  return {{"model", "tiny"},
          {"max_tokens", 4},
          {"temperature", 0},
          {"messages", json::array({{{"role", "system"}, {"content", system_prompt()}},
                                    {{"role", "user"}, {"content", question}}})}};
}

TEST_F(ServePrefixCache, EveryFrontReportsTheCachedPromptTokens) {
  const json first = post("/v1/chat/completions", chat("first question"));
  EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0) << first.dump();
  const json second = post("/v1/chat/completions", chat("second question"));
  const int cached = second["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_GT(cached, 300) << second.dump();
  EXPECT_EQ(cached % 16, 0);
  EXPECT_LT(cached, second["usage"]["prompt_tokens"].get<int>());

  // Streamed: the usage chunk carries it too.
  json body = chat("third question");
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  const std::string sse = raw("/v1/chat/completions", body);
  EXPECT_NE(sse.find("\"prompt_tokens_details\":{\"cached_tokens\":" + std::to_string(cached) + "}"),
            std::string::npos)
      << sse;

  // Anthropic counts cache reads apart from input_tokens.
  json m = {{"model", "tiny"},
            {"max_tokens", 4},
            {"system", system_prompt()},
            {"messages", json::array({{{"role", "user"}, {"content", "fourth question"}}})}};
  const json msg = post("/v1/messages", m, {{"x-api-key", "k"}});
  const int read = msg["usage"]["cache_read_input_tokens"].get<int>();
  EXPECT_GT(read, 300) << msg.dump();
  m["messages"][0]["content"] = "fourth question, again";
  const json msg2 = post("/v1/messages", m, {{"x-api-key", "k"}});
  const std::string count =
      raw("/v1/messages/count_tokens",
          {{"model", "tiny"}, {"system", system_prompt()}, {"messages", m["messages"]}});
  const int total = json::parse(count)["input_tokens"].get<int>();
  EXPECT_EQ(msg2["usage"]["input_tokens"].get<int>() + msg2["usage"]["cache_read_input_tokens"].get<int>(),
            total)
      << msg2.dump();

  const json r = post(
      "/v1/responses",
      {{"model", "tiny"}, {"instructions", system_prompt()}, {"input", "fifth"}, {"max_output_tokens", 3}});
  const json r2 = post(
      "/v1/responses",
      {{"model", "tiny"}, {"instructions", system_prompt()}, {"input", "sixth"}, {"max_output_tokens", 3}});
  EXPECT_GT(r2["usage"]["input_tokens_details"]["cached_tokens"].get<int>(), 300) << r2.dump();
  EXPECT_LE(r2["usage"]["input_tokens_details"]["cached_tokens"].get<int>(),
            r2["usage"]["input_tokens"].get<int>());

  const std::string text = live_.metrics.render("tiny");
  EXPECT_NE(text.find("vllm:prefix_cache_queries_total{model_name=\"tiny\",engine=\"0\"} "),
            std::string::npos);
  EXPECT_EQ(text.find("vllm:prefix_cache_hits_total{model_name=\"tiny\",engine=\"0\"} 0\n"),
            std::string::npos)
      << text;
}

}  // namespace
}  // namespace spk::rt
