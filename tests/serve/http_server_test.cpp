// The HTTP server end to end on loopback, in process, against the hash fake model: auth, every error
// path (and the server stays up), usage counts, stop strings, chat templates, SSE, client disconnect,
// and the official `openai` npm client (streaming, non-streaming, 32 concurrent streams, batching
// equals single-request greedy output).
#include "runtime/serve/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <thread>

#include "tests/serve/fakes.h"

namespace spk::rt {
namespace {

using nlohmann::json;
const char* kKey = "test-key-123";

class ServerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(model_.allocate_kv(256, 16).ok());  // 4096 tokens
    EngineConfig ec;
    ec.sched = {64, 256};
    ec.max_model_len = 512;
    ec.eos_ids = {testing::ByteTokenizer::kEos};
    engine_ = std::make_unique<Engine>(model_, ec, &metrics_);
    metrics_.set_gauge_source([this] { return engine_->gauges(); });
    engine_->start();
    HttpConfig hc;
    hc.port = 0;
    hc.served_model_name = "tiny";
    hc.api_key = kKey;
    hc.max_body_bytes = 64 * 1024;
    hc.max_n = 4;
    hc.keepalive_ms = 200;
    server_ = std::make_unique<HttpServer>(hc, *engine_, std::make_shared<testing::ByteTokenizer>(),
                                           testing::line_chat_config(), metrics_);
    ASSERT_TRUE(server_->bind().ok());
    thread_ = std::thread([this] { server_->run(); });
  }
  void TearDown() override {
    server_->stop();
    if (thread_.joinable()) thread_.join();
    engine_->stop();
  }
  httplib::Client client(const std::string& key = kKey) {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(30, 0);
    if (!key.empty()) c.set_bearer_token_auth(key.c_str());
    return c;
  }
  json post(const std::string& path, const std::string& body, int expect_status) {
    auto c = client();
    auto r = c.Post(path.c_str(), body, "application/json");
    EXPECT_TRUE(r) << path << " " << body;
    if (!r) return {};
    EXPECT_EQ(r->status, expect_status) << body << " -> " << r->body;
    auto j = json::parse(r->body, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r->body;
    return j;
  }
  void expect_alive() {
    auto r = client().Get("/health");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
  }

  testing::HashModel model_{1};  // 1 ms per step: streams interleave like on a real device
  Metrics metrics_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

TEST_F(ServerFixture, AuthOnEveryRouteButHealth) {
  auto anon = client("");
  auto h = anon.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  for (const char* p : {"/v1/models", "/metrics"}) {
    auto r = anon.Get(p);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << p;
    EXPECT_EQ(json::parse(r->body)["error"]["code"], "invalid_api_key");
  }
  auto wrong = client("wrong-key");
  auto r = wrong.Post("/v1/completions", R"({"model":"tiny","prompt":"a"})", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  auto m = client().Get("/v1/models");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_EQ(json::parse(m->body)["data"][0]["id"], "tiny");
}

TEST_F(ServerFixture, ErrorsAreJsonAndTheServerStaysUp) {
  EXPECT_EQ(post("/v1/completions", "{not json", 400)["error"]["type"], "invalid_request_error");
  EXPECT_EQ(post("/v1/completions", R"({"model":"nope","prompt":"a"})", 404)["error"]["code"],
            "model_not_found");
  EXPECT_EQ(
      post("/v1/completions", R"({"model":"tiny","prompt":"a","max_tokens":-5})", 400)["error"]["param"],
      "max_tokens");
  EXPECT_EQ(post("/v1/completions", R"({"model":"tiny","prompt":"a","n":9})", 400)["error"]["param"], "n");
  std::string longp(600, 'a');
  auto j = post("/v1/completions", R"({"model":"tiny","prompt":")" + longp + R"("})", 400);
  EXPECT_NE(j["error"]["message"].get<std::string>().find("maximum context length is 512"),
            std::string::npos);
  EXPECT_EQ(
      post("/v1/completions", R"({"model":"tiny","prompt":"abc","max_tokens":510})", 400)["error"]["param"],
      "max_tokens");
  std::string huge = R"({"model":"tiny","prompt":")" + std::string(100 * 1024, 'x') + R"("})";
  EXPECT_EQ(post("/v1/completions", huge, 413)["error"]["type"], "invalid_request_error");
  EXPECT_EQ(post("/v1/chat/completions", R"({"model":"tiny","messages":"hi"})", 400)["error"]["param"],
            "messages");
  EXPECT_EQ(post("/v1/nothing", "{}", 404)["error"]["type"], "NotFoundError");
  expect_alive();
  auto ok = post("/v1/completions", R"({"model":"tiny","prompt":"still here","max_tokens":3})", 200);
  EXPECT_EQ(ok["usage"]["completion_tokens"], 3);
}

TEST_F(ServerFixture, CompletionUsageStopAndDeterminism) {
  auto a =
      post("/v1/completions", R"({"model":"tiny","prompt":"hello","max_tokens":20,"temperature":0})", 200);
  EXPECT_EQ(a["object"], "text_completion");
  EXPECT_EQ(a["usage"]["prompt_tokens"], 6);  // <bos> + 5 bytes
  EXPECT_EQ(a["usage"]["completion_tokens"], 20);
  EXPECT_EQ(a["choices"][0]["finish_reason"], "length");
  std::string text = a["choices"][0]["text"];
  ASSERT_EQ(text.size(), 20u);
  auto b =
      post("/v1/completions", R"({"model":"tiny","prompt":"hello","max_tokens":20,"temperature":0})", 200);
  EXPECT_EQ(b["choices"][0]["text"], text);
  // Stop at a string that occurs in the greedy output: text ends right before it.
  std::string stop = text.substr(8, 2);
  auto c = post(
      "/v1/completions",
      json{{"model", "tiny"}, {"prompt", "hello"}, {"max_tokens", 20}, {"temperature", 0}, {"stop", stop}}
          .dump(),
      200);
  EXPECT_EQ(c["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(c["choices"][0]["text"], text.substr(0, text.find(stop)));
  // n = 3 sampled choices, each with its own tokens; logprobs basics.
  auto n = post(
      "/v1/completions",
      R"({"model":"tiny","prompt":"hi","max_tokens":5,"n":3,"temperature":1,"seed":7,"logprobs":0})", 200);
  ASSERT_EQ(n["choices"].size(), 3u);
  EXPECT_EQ(n["usage"]["completion_tokens"], 15);
  EXPECT_EQ(n["choices"][2]["logprobs"]["token_logprobs"].size(), 5u);
  EXPECT_LE(n["choices"][2]["logprobs"]["token_logprobs"][0].get<double>(), 0.0);
}

TEST_F(ServerFixture, ChatAppliesTheTemplateAndKwargs) {
  auto a = post("/v1/chat/completions",
                R"({"model":"tiny","messages":[{"role":"user","content":"hey"}],"max_completion_tokens":4,
                    "temperature":0})",
                200);
  EXPECT_EQ(a["object"], "chat.completion");
  EXPECT_EQ(a["choices"][0]["message"]["role"], "assistant");
  // "user: hey\nassistant:" = 20 bytes, no <bos> (the template owns special tokens)
  EXPECT_EQ(a["usage"]["prompt_tokens"], 20);
  auto b =
      post("/v1/chat/completions",
           R"({"model":"tiny","messages":[{"role":"user","content":"hey"}],"max_tokens":4,"temperature":0,
                    "chat_template_kwargs":{"enable_thinking":true}})",
           200);
  EXPECT_EQ(b["usage"]["prompt_tokens"], 27);  // + "[think]"
}

std::string sse_body(httplib::Client& c, const std::string& body) {
  std::string got;
  auto r = c.Post("/v1/chat/completions", httplib::Headers{}, body, "application/json");
  if (r) got = r->body;
  return got;
}

TEST_F(ServerFixture, StreamingSendsChunksUsageAndDone) {
  auto c = client();
  std::string s = sse_body(c, R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"max_tokens":6,
      "temperature":0,"stream":true,"stream_options":{"include_usage":true}})");
  ASSERT_GE(s.size(), 20u);
  EXPECT_EQ(s.substr(s.size() - 14), "data: [DONE]\n\n");
  std::string text;
  json usage;
  std::string finish;
  size_t pos = 0;
  while ((pos = s.find("data: ", pos)) != std::string::npos) {
    size_t end = s.find("\n\n", pos);
    std::string payload = s.substr(pos + 6, end - pos - 6);
    pos = end;
    if (payload == "[DONE]") break;
    auto j = json::parse(payload);
    if (j.contains("usage") && !j["usage"].is_null()) usage = j["usage"];
    for (const auto& ch : j["choices"]) {
      text += ch["delta"].value("content", "");
      if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
    }
  }
  EXPECT_EQ(text.size(), 6u);
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(usage["completion_tokens"], 6);
  auto full = post(
      "/v1/chat/completions",
      R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"max_tokens":6,"temperature":0})", 200);
  EXPECT_EQ(full["choices"][0]["message"]["content"], text);
}

TEST_F(ServerFixture, NonStreamingClientDisconnectFreesTheSequence) {
  // Nothing is written to a non-streaming client before its answer: the server must notice the hang-up
  // from the connection itself (400 tokens at >= 1 ms per step would run >= 400 ms without it).
  std::string body = R"({"model":"tiny","prompt":"go","max_tokens":400,"ignore_eos":true})";
  std::string req = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                    std::string(kKey) +
                    "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\n\r\n" + body;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  bool running = false;
  for (int i = 0; i < 200 && !running; ++i) {
    running = engine_->gauges().running > 0;
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(running);
  const int steps_at_close = model_.steps.load();
  ::close(fd);
  bool freed = false;
  for (int i = 0; i < 300 && !freed; ++i) {
    auto g = engine_->gauges();
    freed = g.running == 0 && g.kv_usage == 0.0;
    if (!freed) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_TRUE(freed) << "the sequence kept running after its client left";
  // Freed early: far fewer than the 400 steps the request asked for ran after the hang-up.
  EXPECT_LT(model_.steps.load() - steps_at_close, 300);
  // The server still answers the next request.
  auto r = client().Post("/v1/completions", R"({"model":"tiny","prompt":"hi","max_tokens":3})",
                         "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(ServerFixture, ClientDisconnectFreesTheSequence) {
  // Raw socket: ask for a long stream, read the first bytes, hang up.
  std::string body = R"({"model":"tiny","prompt":"go","max_tokens":400,"ignore_eos":true,"stream":true})";
  std::string req = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                    std::string(kKey) +
                    "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\n\r\n" + body;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  size_t seen = 0;
  char buf[256];
  while (seen < 400) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    seen += static_cast<size_t>(n);
  }
  EXPECT_GT(engine_->gauges().running, 0);  // still generating
  ::close(fd);
  bool freed = false;
  for (int i = 0; i < 300 && !freed; ++i) {
    auto g = engine_->gauges();
    freed = g.running == 0 && g.kv_usage == 0.0;
    if (!freed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(freed) << "the sequence kept running after its client left";
  auto m = client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("sparkctl_generation_tokens_total{model_name=\"tiny\"}"), std::string::npos);
  EXPECT_NE(m->body.find("sparkctl_time_to_first_token_seconds_bucket"), std::string::npos);
  EXPECT_LT(engine_->gauges().preemptions + model_.steps.load(), 100000u);
}

// The official openai npm client against the live server (scripts/npm/node_modules/openai).
TEST_F(ServerFixture, OfficialOpenAiClient) {
  std::string cmd = std::string("node ") + SPARKCTL_SOURCE_DIR + "/tests/serve/openai_client.cjs " +
                    SPARKCTL_NPM_DIR + " http://127.0.0.1:" + std::to_string(server_->port()) + "/v1 " +
                    kKey + " tiny 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_TRUE(p);
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = ::pclose(p);
  EXPECT_EQ(st, 0) << out;
  EXPECT_NE(out.find("ok: all checks passed"), std::string::npos) << out;
  std::printf("%s", out.c_str());
}

}  // namespace
}  // namespace spk::rt
