// The HTTP server end to end on loopback, in process, against the hash fake model: auth, every error
// path (and the server stays up), usage counts, stop strings, chat templates, SSE, client disconnect,
// and the official `openai` npm client (streaming, non-streaming, 32 concurrent streams, batching
// equals single-request greedy output).
#include "runtime/serve/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "tests/serve/live_server.h"

namespace spk::rt {
namespace {

using nlohmann::json;
const char* kKey = "test-key-123";

class ServerFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpConfig hc;
    hc.served_model_name = "tiny";
    hc.api_key = kKey;
    hc.max_body_bytes = 64 * 1024;
    hc.max_n = 4;
    hc.keepalive_ms = 200;
    tune(hc);
    live_.start(hc, testing::LiveServer::engine_config(), chat_config());
  }
  virtual void tune(HttpConfig&) {}
  virtual ChatConfig chat_config() { return testing::line_chat_config(); }
  httplib::Client client(const std::string& key = kKey) {
    httplib::Client c("127.0.0.1", live_.server->port());
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

  testing::LiveServer live_{1};  // 1 ms per step: streams interleave like on a real device
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

// The Anthropic SDK (and Claude Code's model picker) reads the Models API's page: type, display_name,
// created_at, has_more, first_id / last_id. A request with `anthropic-version` gets that shape.
TEST_F(ServerFixture, ModelsInAnthropicShapeForAnthropicClients) {
  auto r = client().Get("/v1/models", httplib::Headers{{"anthropic-version", "2023-06-01"}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const json j = json::parse(r->body);
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["type"], "model");
  EXPECT_EQ(j["data"][0]["id"], "tiny");
  EXPECT_EQ(j["data"][0]["display_name"], "tiny");
  const std::string at = j["data"][0]["created_at"];
  EXPECT_EQ(at.size(), 20u) << at;  // 2026-12-07T17:54:24Z
  EXPECT_EQ(at.back(), 'Z');
  EXPECT_EQ(j["has_more"], false);
  EXPECT_EQ(j["first_id"], "tiny");
  EXPECT_EQ(j["last_id"], "tiny");
  EXPECT_FALSE(j.contains("object"));
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
  addr.sin_port = htons(static_cast<uint16_t>(live_.server->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  bool running = false;
  for (int i = 0; i < 200 && !running; ++i) {
    running = live_.engine->gauges().running > 0;
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(running);
  const int steps_at_close = live_.model.steps.load();
  ::close(fd);
  bool freed = false;
  for (int i = 0; i < 300 && !freed; ++i) {
    auto g = live_.engine->gauges();
    freed = g.running == 0 && g.kv_usage == 0.0;
    if (!freed) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_TRUE(freed) << "the sequence kept running after its client left";
  // Freed early: far fewer than the 400 steps the request asked for ran after the hang-up.
  EXPECT_LT(live_.model.steps.load() - steps_at_close, 300);
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
  addr.sin_port = htons(static_cast<uint16_t>(live_.server->port()));
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
  EXPECT_GT(live_.engine->gauges().running, 0);  // still generating
  ::close(fd);
  bool freed = false;
  for (int i = 0; i < 300 && !freed; ++i) {
    auto g = live_.engine->gauges();
    freed = g.running == 0 && g.kv_usage == 0.0;
    if (!freed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(freed) << "the sequence kept running after its client left";
  auto m = client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("vllm:generation_tokens_total{model_name=\"tiny\",engine=\"0\"}"), std::string::npos)
      << m->body;
  EXPECT_NE(
      m->body.find("vllm:time_to_first_token_seconds_bucket{model_name=\"tiny\",engine=\"0\",le=\"0.001\"}"),
      std::string::npos)
      << m->body;
  for (const char* name :
       {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
        "vllm:num_preemptions_total", "vllm:prompt_tokens_total", "vllm:inter_token_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_sum"})
    EXPECT_NE(m->body.find(std::string(name) + "{model_name=\"tiny\""), std::string::npos) << name;
  EXPECT_LT(live_.engine->gauges().preemptions + live_.model.steps.load(), 100000u);
}

// The official openai npm client against the live server (scripts/npm/node_modules/openai).
TEST_F(ServerFixture, OfficialOpenAiClient) {
  std::string cmd = std::string("node ") + SPARKCTL_SOURCE_DIR + "/tests/serve/openai_client.cjs " +
                    SPARKCTL_NPM_DIR + " http://127.0.0.1:" + std::to_string(live_.server->port()) + "/v1 " +
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

// ---- issue 29: hostile requests ----

TEST_F(ServerFixture, EveryCountIsCheckedIn64Bits) {
  // max_tokens 2^31-1 used to wrap past the context check (prompt + max_tokens in int) and run to
  // max_model_len; every size now gets the same context-length 400 naming the field it came in.
  for (const char* v : {"2147483647", "2147483648", "4294967297", "9223372036854775807"}) {
    auto j = post(
        "/v1/chat/completions",
        std::string(R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"max_tokens":)") + v + "}",
        400);
    EXPECT_EQ(j["error"]["param"], "max_tokens") << v;
    EXPECT_NE(j["error"]["message"].get<std::string>().find("maximum context length is 512"),
              std::string::npos)
        << j.dump();
  }
  auto mct = post(
      "/v1/chat/completions",
      R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"max_completion_tokens":2147483647})",
      400);
  EXPECT_EQ(mct["error"]["param"], "max_completion_tokens");
  EXPECT_NE(mct["error"]["message"].get<std::string>().find("maximum context length"), std::string::npos);
  // Past int64: still a 400 naming the field (never a wrapped value).
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {R"({"model":"tiny","prompt":"a","max_tokens":9223372036854775808})", "max_tokens"},
      {R"({"model":"tiny","prompt":"a","max_tokens":18446744073709551615})", "max_tokens"},
      {R"({"model":"tiny","prompt":"a","n":4294967297})", "n"},
      {R"({"model":"tiny","prompt":"a","n":18446744073709551615})", "n"},
      {R"({"model":"tiny","prompt":"a","logprobs":4294967296})", "logprobs"},
      {R"({"model":"tiny","prompt":"a","best_of":4294967297})", "best_of"},
      {R"({"model":"tiny","prompt":"a","best_of":2})", "best_of"},
      {R"({"model":"tiny","prompt":"a","n":2,"best_of":1})", "best_of"},
      {R"({"model":"tiny","prompt":"a","seed":18446744073709551615})", "seed"},
      {R"({"model":"tiny","prompt":"a","top_k":18446744073709551615})", "top_k"},
      {R"({"model":"tiny","prompt":[4294967296]})", "prompt"},
      {R"({"model":"tiny","prompt":[18446744073709551615]})", "prompt"},
      {R"({"model":"tiny","prompt":[300]})", "prompt"},
      {R"({"model":"tiny","prompt":"a","stop_token_ids":[4294967296]})", "stop_token_ids"},
      {R"({"model":"tiny","prompt":"a","logit_bias":{"4294967296":1}})", "logit_bias"},
      {R"({"model":"tiny","prompt":"a","logit_bias":{"99999999999999999999999":1}})", "logit_bias"},
      {R"({"model":"tiny","prompt":"a","logit_bias":{"-1":1}})", "logit_bias"},
      {R"({"model":"tiny","prompt":"a","logit_bias":{"300":1}})", "logit_bias"},
      {R"({"model":"tiny","prompt":"a","logit_bias":{"65":1000}})", "logit_bias"},
      {R"({"model":"tiny","prompt":"a","logit_bias":{"65":5}})", "logit_bias"},
      {R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"top_logprobs":4294967296})",
       "top_logprobs"},
  };
  for (const auto& c : cases) {
    const bool chat = std::string(c.body).find("messages") != std::string::npos;
    auto j = post(chat ? "/v1/chat/completions" : "/v1/completions", c.body, 400);
    EXPECT_EQ(j["error"]["param"], c.param) << c.body << " -> " << j.dump();
    EXPECT_EQ(j["error"]["type"], "invalid_request_error") << c.body;
  }
  // In range: accepted as before.
  post("/v1/completions",
       R"({"model":"tiny","prompt":"a","max_tokens":2,"seed":-1,"best_of":1,"logit_bias":{}})", 200);
  post("/v1/completions", R"({"model":"tiny","prompt":"a","max_tokens":2,"seed":9223372036854775807})", 200);
  expect_alive();
}

// A template compiled under a server-side path name, failing on every render.
class FailingTemplateFixture : public ServerFixture {
 protected:
  ChatConfig chat_config() override {
    auto t = ChatTemplate::parse("{{ raise_exception('roles must alternate, got ' + messages[0].role) }}",
                                 "/srv/secret-models/qwen/tokenizer_config.json");
    EXPECT_TRUE(t.ok());
    return ChatConfig{t.ok() ? *t : nullptr, "<bos>", "<eos>", "", {}};
  }
};

TEST_F(FailingTemplateFixture, TemplateErrorsNameTheFieldNeverAServerPath) {
  auto j =
      post("/v1/chat/completions", R"({"model":"tiny","messages":[{"role":"robot","content":"x"}]})", 400);
  const std::string body = j.dump();
  EXPECT_EQ(j["error"]["param"], "messages") << body;
  EXPECT_EQ(body.find("/srv"), std::string::npos) << body;
  EXPECT_EQ(body.find("tokenizer_config.json"), std::string::npos) << body;
  EXPECT_NE(body.find("roles must alternate, got robot"), std::string::npos) << body;
  expect_alive();
}

// ---- issue 28/29: the connection front ----

// A raw loopback connection to the server, for requests no HTTP client would send.
struct Raw {
  int fd = -1;
  explicit Raw(int port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ~Raw() {
    if (fd >= 0) ::close(fd);
  }
  bool send_all(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Everything until the server closes, or `timeout`.
  std::string read_all(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
    std::string out;
    const auto end = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
};

int status_of(const std::string& resp) {
  return resp.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(resp.c_str() + 9) : -1;
}
json body_of(const std::string& resp) {
  const auto p = resp.find("\r\n\r\n");
  return p == std::string::npos ? json() : json::parse(resp.substr(p + 4), nullptr, false);
}
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

class FrontFixture : public ServerFixture {
 protected:
  void tune(HttpConfig& hc) override {
    hc.head_timeout_ms = 600;
    hc.body_timeout_ms = 600;
    hc.threads = 24;  // lane-demo: 2 * max_num_seqs(4) + 16
  }
};

TEST_F(FrontFixture, MalformedRequestsAreAnsweredAtOnceOrAfterAShortTimeout) {
  const std::string auth = std::string("Authorization: Bearer ") + kKey + "\r\n";
  struct Case {
    std::string request;
    int status;
    double max_s;  // answered within
  };
  const std::string chat = R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"max_tokens":1})";
  const Case cases[] = {
      {"PATCH /health HTTP/1.1\r\nHost: x\r\n\r\n", 405, 0.3},
      {"PATCH /health HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n", 405, 0.3},
      {"DELETE /v1/models HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n", 405, 0.3},
      {"GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n", 405, 0.3},
      {"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n", 411, 0.3},
      {"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth +
           "Expect: teapot\r\nContent-Length: 5\r\n\r\n",
       417, 0.3},
      {"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 99999999999\r\n\r\n",
       413, 0.3},
      {"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth +
           "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
       400, 0.3},
      {"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth + "Transfer-Encoding: gzip\r\n\r\n", 501,
       0.3},
      {"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n", 401, 0.3},
      {"BREW /health HTTP/1.1\r\nHost: x\r\nbad header line\r\n\r\n", 400, 0.3},
      {"GET /health HTTP/2.0\r\n\r\n", 400, 0.3},
      // A lying Content-Length: 100 announced, 10 sent -> 408 after the body timeout (0.6 s).
      {"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth + "Content-Length: 100\r\n\r\n0123456789",
       408, 1.5},
      // Expect: 100-continue and then no body: 100 Continue, then 408.
      {"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth +
           "Expect: 100-continue\r\nContent-Length: 20\r\n\r\n",
       100, 1.5},
      // Half a head, then silence: 408 after the head timeout.
      {"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n", 408, 1.5},
  };
  for (const auto& c : cases) {
    Raw r(live_.server->port());
    ASSERT_GE(r.fd, 0);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(r.send_all(c.request));
    const std::string resp = r.read_all();
    const double took = seconds_since(t0);
    EXPECT_EQ(status_of(resp), c.status) << c.request << "\n-> " << resp;
    EXPECT_LT(took, c.max_s) << c.request;
    if (c.status == 100) {
      EXPECT_NE(resp.find("HTTP/1.1 408"), std::string::npos) << resp;
      continue;
    }
    auto j = body_of(resp);
    ASSERT_TRUE(j.is_object() && j.contains("error")) << resp;  // the OpenAI error shape
    EXPECT_TRUE(j["error"]["message"].is_string()) << resp;
    EXPECT_TRUE(j["error"].contains("type") && j["error"].contains("param") && j["error"].contains("code"))
        << resp;
    if (c.status == 405) EXPECT_NE(resp.find("Allow: "), std::string::npos) << resp;
  }
  // A chunked body within the cap is decoded and served; Expect: 100-continue with its body works.
  {
    Raw r(live_.server->port());
    std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth +
                      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    for (size_t i = 0; i < chat.size(); i += 7) {
      const std::string part = chat.substr(i, 7);
      char sz[16];
      std::snprintf(sz, sizeof sz, "%zx", part.size());
      req += std::string(sz) + "\r\n" + part + "\r\n";
    }
    req += "0\r\n\r\n";
    ASSERT_TRUE(r.send_all(req));
    const std::string resp = r.read_all();
    EXPECT_EQ(status_of(resp), 200) << resp;
    EXPECT_EQ(body_of(resp)["usage"]["completion_tokens"], 1) << resp;
  }
  {
    Raw r(live_.server->port());
    ASSERT_TRUE(r.send_all("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth +
                           "Expect: 100-continue\r\nConnection: close\r\nContent-Length: " +
                           std::to_string(chat.size()) + "\r\n\r\n"));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_TRUE(r.send_all(chat));
    const std::string resp = r.read_all();
    EXPECT_EQ(resp.rfind("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200", 0), 0u) << resp;
  }
  // Keep-alive: two requests on one connection, the second pipelined behind the first.
  {
    Raw r(live_.server->port());
    const std::string one = "GET /v1/models HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n";
    const std::string two = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + auth +
                            "Connection: close\r\nContent-Length: " + std::to_string(chat.size()) +
                            "\r\n\r\n" + chat;
    ASSERT_TRUE(r.send_all(one + two));
    const std::string resp = r.read_all();
    EXPECT_EQ(status_of(resp), 200) << resp;
    EXPECT_NE(resp.find("HTTP/1.1 200", 10), std::string::npos) << resp;
    EXPECT_NE(resp.find("completion_tokens"), std::string::npos) << resp;
  }
  expect_alive();
}

// Oversized heads and chunked bodies are refused while they arrive: the server answers and closes
// long before the sender is done (the sender sees the reset), and memory is not spent on the rest.
TEST_F(FrontFixture, OversizedHeadsAndChunkedBodiesAreRefusedBeforeBeingReadInFull) {
  const std::string auth = std::string("Authorization: Bearer ") + kKey + "\r\n";
  auto flood = [&](const std::string& start, const std::string& unit, int expect_status) {
    Raw r(live_.server->port());
    ASSERT_GE(r.fd, 0);
    ASSERT_TRUE(r.send_all(start));
    size_t sent = start.size();
    const size_t limit = 256u << 20;  // 256 MB offered
    bool cut = false;
    while (sent < limit) {
      if (!r.send_all(unit)) {
        cut = true;
        break;
      }
      sent += unit.size();
    }
    EXPECT_TRUE(cut) << "the server read all " << sent << " bytes";
    // The front drops up to 8 MiB after its answer (so a client still sending reads the answer), and the
    // kernel buffers hold a few MiB more: far below the 256 MB offered, and none of it kept in memory.
    EXPECT_LT(sent, 32u << 20) << "bytes accepted before the refusal";
    std::printf("refused %d after %zu bytes offered\n", expect_status, sent);
  };
  std::string header_line = "X-Pad: " + std::string(1000, 'a') + "\r\n";
  std::string lines;
  for (int i = 0; i < 64; ++i) lines += header_line;
  // No key at all: the cap holds regardless of auth.
  flood("GET /v1/models HTTP/1.1\r\nHost: x\r\n", lines, 431);
  flood("GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Long: ", std::string(64 << 10, 'b'), 431);
  std::string chunk = "10000\r\n" + std::string(0x10000, 'c') + "\r\n";
  flood("POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\n", chunk,
        413);
  // The answers themselves, on a connection that stops sending at the cap.
  {
    Raw r(live_.server->port());
    r.send_all("GET /v1/models HTTP/1.1\r\nHost: x\r\n" + lines);
    const std::string resp = r.read_all();
    EXPECT_EQ(status_of(resp), 431) << resp;
    EXPECT_TRUE(body_of(resp).contains("error")) << resp;
  }
  {
    Raw r(live_.server->port());
    r.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\n" +
               chunk + chunk);
    const std::string resp = r.read_all();
    EXPECT_EQ(status_of(resp), 413) << resp;
    EXPECT_EQ(body_of(resp)["error"]["type"], "invalid_request_error") << resp;
  }
  EXPECT_GE(live_.server->front_stats().oversized, 5u);
  expect_alive();
}

// Issue 28: idle and trickling unauthenticated connections cost no handler thread. 200 of them (more
// than 8x the 24 handler threads of lane-demo) are held open while 16 streams run: every stream
// completes, /health stays fast, the tricklers are cut at the head timeout.
TEST_F(FrontFixture, SlowConnectionsCannotStarveServing) {
  std::vector<std::unique_ptr<Raw>> idle, trickle;
  for (int i = 0; i < 100; ++i) {
    idle.push_back(std::make_unique<Raw>(live_.server->port()));
    trickle.push_back(std::make_unique<Raw>(live_.server->port()));
    ASSERT_GE(idle.back()->fd, 0);
    ASSERT_GE(trickle.back()->fd, 0);
    trickle.back()->send_all("GET /v1/models HTTP/1.1\r\n");
  }
  std::atomic<bool> done{false};
  std::thread trickler([&] {  // one header byte per connection every 50 ms
    while (!done) {
      for (auto& t : trickle) (void)::send(t->fd, "X", 1, MSG_NOSIGNAL);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> streams;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 16; ++i)
    streams.emplace_back([&, i] {
      auto c = client();
      std::string body = R"({"model":"tiny","messages":[{"role":"user","content":"s)" + std::to_string(i) +
                         R"("}],"max_tokens":40,"stream":true})";
      auto r = c.Post("/v1/chat/completions", body, "application/json");
      if (r && r->status == 200 && r->body.find("data: [DONE]") != std::string::npos)
        ++ok;
      else
        ++failed;
    });
  double worst_health = 0;
  for (int i = 0; i < 10; ++i) {
    const auto h0 = std::chrono::steady_clock::now();
    auto h = client("").Get("/health");
    worst_health = std::max(worst_health, seconds_since(h0));
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 200);
    EXPECT_TRUE(json::parse(h->body)["engine"].contains("steps")) << h->body;
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
  }
  for (auto& t : streams) t.join();
  const double streams_s = seconds_since(t0);
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // past the 600 ms head timeout
  done = true;
  trickler.join();
  EXPECT_EQ(ok.load(), 16);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_LT(worst_health, 0.25);
  const FrontStats st = live_.server->front_stats();
  EXPECT_GE(st.head_timeouts, 100u);  // every trickler was cut with a 408
  std::printf("16 streams in %.2f s beside 200 slow connections; worst /health %.3f s; %llu tricklers cut\n",
              streams_s, worst_health, static_cast<unsigned long long>(st.head_timeouts));
  // The tricklers got their 408 in the API's error shape.
  const std::string resp = trickle.front()->read_all(std::chrono::milliseconds(200));
  EXPECT_EQ(status_of(resp), 408) << resp;
}

class TinyPoolFixture : public ServerFixture {
 protected:
  void tune(HttpConfig& hc) override {
    hc.threads = 2;
    hc.max_queued = 2;
  }
};

// Admission past capacity answers at once: 503 with Retry-After, in the API's error shape; /health is
// answered while every handler thread is busy.
TEST_F(TinyPoolFixture, AdmissionBeyondCapacityIs503WithRetryAfter) {
  std::vector<std::thread> ts;
  std::atomic<int> ok{0}, busy{0}, other{0};
  std::atomic<double> worst_busy{0};
  for (int i = 0; i < 10; ++i) {
    ts.emplace_back([&, i] {
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * i));
      auto c = client();
      const auto t0 = std::chrono::steady_clock::now();
      auto r =
          c.Post("/v1/completions", R"({"model":"tiny","prompt":"go","max_tokens":300,"ignore_eos":true})",
                 "application/json");
      if (r && r->status == 200) {
        ++ok;
      } else if (r && r->status == 503) {
        ++busy;
        EXPECT_EQ(r->get_header_value("Retry-After"), "1");
        EXPECT_EQ(json::parse(r->body)["error"]["code"], "server_overloaded") << r->body;
        double t = seconds_since(t0), w = worst_busy.load();
        while (t > w && !worst_busy.compare_exchange_weak(w, t)) {
        }
      } else {
        ++other;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const auto h0 = std::chrono::steady_clock::now();
  auto h = client("").Get("/health");
  const double health_s = seconds_since(h0);
  for (auto& t : ts) t.join();
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_LT(health_s, 0.2);
  EXPECT_GE(ok.load(), 4);  // 2 running + 2 queued at least
  EXPECT_GE(busy.load(), 1);
  EXPECT_EQ(other.load(), 0);
  EXPECT_LT(worst_busy.load(), 0.2);  // refused at once, not after a wait
}

}  // namespace
}  // namespace spk::rt

namespace spk::rt {
namespace {

// /v1/messages (x-api-key auth, Anthropic error shape, stream, count_tokens) and /v1/responses (store,
// GET, previous_response_id) through the live server.
TEST_F(ServerFixture, MessagesAndResponsesRoutes) {
  httplib::Client a("127.0.0.1", live_.server->port());
  a.set_read_timeout(30, 0);
  const std::string mbody = R"({"model":"tiny","max_tokens":4,"temperature":0,"system":"s",
                               "messages":[{"role":"user","content":"hey"}]})";
  auto no = a.Post("/v1/messages", mbody, "application/json");
  ASSERT_TRUE(no);
  EXPECT_EQ(no->status, 401);
  EXPECT_EQ(json::parse(no->body)["error"]["type"], "authentication_error");
  httplib::Headers key{{"x-api-key", kKey}};
  auto m = a.Post("/v1/messages", key, mbody, "application/json");
  ASSERT_TRUE(m);
  ASSERT_EQ(m->status, 200) << m->body;
  auto mj = json::parse(m->body);
  EXPECT_EQ(mj["type"], "message");
  EXPECT_EQ(mj["stop_reason"], "max_tokens");
  EXPECT_EQ(mj["usage"]["output_tokens"], 4);
  auto st = a.Post("/v1/messages", key, mbody.substr(0, mbody.size() - 1) + R"(,"stream":true})",
                   "application/json");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->body.rfind("event: message_start", 0), 0u) << st->body;
  EXPECT_NE(st->body.find("event: message_stop"), std::string::npos) << st->body;
  auto ct = a.Post("/v1/messages/count_tokens", key,
                   R"({"model":"tiny","messages":[{"role":"user","content":"hey"}]})", "application/json");
  ASSERT_TRUE(ct);
  EXPECT_EQ(json::parse(ct->body)["input_tokens"], 20);  // "user: hey\nassistant:"
  auto bad = a.Post("/v1/messages", key, R"({"model":"tiny","messages":[{"role":"user","content":"x"}]})",
                    "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_NE(json::parse(bad->body)["error"]["message"].get<std::string>().find("max_tokens"),
            std::string::npos);

  auto r =
      post("/v1/responses", R"({"model":"tiny","input":"hey","max_output_tokens":3,"temperature":0})", 200);
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "incomplete");
  const std::string id = r["id"];
  auto g = client().Get(("/v1/responses/" + id).c_str());
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 200);
  EXPECT_EQ(json::parse(g->body)["id"], id);
  auto r2 = post(
      "/v1/responses",
      R"({"model":"tiny","input":"more","max_output_tokens":2,"previous_response_id":")" + id + R"("})", 200);
  EXPECT_GT(r2["usage"]["input_tokens"].get<int>(), r["usage"]["input_tokens"].get<int>() + 5);
  EXPECT_EQ(post("/v1/responses", R"({"model":"tiny","input":"x","previous_response_id":"resp_nope"})",
                 400)["error"]["param"],
            "previous_response_id");
}

}  // namespace
}  // namespace spk::rt

namespace spk::rt {
namespace {

TEST_F(ServerFixture, OfficialResponsesAndAnthropicClients) {
  std::string cmd = std::string("node ") + SPARKCTL_SOURCE_DIR + "/tests/serve/fronts_client.cjs " +
                    SPARKCTL_NPM_DIR + " http://127.0.0.1:" + std::to_string(live_.server->port()) + " " +
                    kKey + " tiny 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_TRUE(p);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << out;
  EXPECT_NE(out.find("ok: all fronts checks passed"), std::string::npos) << out;
}

}  // namespace
}  // namespace spk::rt
