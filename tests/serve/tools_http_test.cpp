// Tool calls and reasoning end to end, in process: the engine emits a scripted answer (EngineConfig::
// scripted_outputs, what `runtime serve --scripted-output` sets) through the real HTTP server with the hermes
// and qwen3 parsers; the official openai and Anthropic npm clients read it (tools_client.cjs), and httplib
// checks what they cannot see (tool_choice validation, server chat_template_kwargs under the request's).
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>
#include <regex>

#include "runtime/serve/http_server.h"
#include "tests/serve/live_server.h"

namespace spk::rt {
namespace {

using nlohmann::json;
const char* kKey = "tools-key";
const std::string kScript =
    "<think>\nI should call the tool.\n</think>\n\nChecking the weather.\n<tool_call>\n"
    R"({"name": "get_weather", "arguments": {"city": "Paris", "days": 3}})"
    "\n</tool_call>";
const char* kTools =
    R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}])";

class ToolServer : public ::testing::Test {
 protected:
  void SetUp() override {
    EngineConfig ec = testing::LiveServer::engine_config();
    ec.sched = {16, 256};
    ec.max_model_len = 1024;
    ec.scripted_outputs.emplace_back();
    for (unsigned char c : kScript) ec.scripted_outputs[0].push_back(c);  // byte tokenizer: a byte is a token
    HttpConfig hc;
    hc.served_model_name = "tiny";
    hc.api_key = kKey;
    hc.parsing = {"hermes", "qwen3"};
    hc.default_chat_template_kwargs = {{"enable_thinking", true}};
    live_.start(hc, ec);
  }
  json post(const std::string& body, int expect, const char* path = "/v1/chat/completions") {
    httplib::Client c("127.0.0.1", live_.server->port());
    c.set_read_timeout(30, 0);
    c.set_bearer_token_auth(kKey);
    auto r = c.Post(path, body, "application/json");
    EXPECT_TRUE(r);
    if (!r) return {};
    EXPECT_EQ(r->status, expect) << body << " -> " << r->body;
    return json::parse(r->body, nullptr, false);
  }

  testing::LiveServer live_;
};

TEST_F(ToolServer, OfficialClientsSeeToolCallsAndReasoning) {
  const size_t cut = kScript.find("\"days\"");  // max_tokens that ends inside the call
  std::string cmd = std::string("node ") + SPARKCTL_SOURCE_DIR + "/tests/serve/tools_client.cjs " +
                    SPARKCTL_NPM_DIR + " http://127.0.0.1:" + std::to_string(live_.server->port()) + " " +
                    kKey + " tiny " + std::to_string(cut) + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  ASSERT_TRUE(p);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  EXPECT_EQ(::pclose(p), 0) << out;
  EXPECT_NE(out.find("ok: all tool-call checks passed"), std::string::npos) << out;
}

TEST_F(ToolServer, ToolChoiceIsValidated) {
  const std::string head =
      R"({"model":"tiny","messages":[{"role":"user","content":"hi"}],"tools":)" + std::string(kTools);
  json e = post(head + R"(,"tool_choice":{"type":"function","function":{"name":"get_time"}}})", 400);
  EXPECT_EQ(e["error"]["param"], "tool_choice");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("'get_time'"), std::string::npos) << e;
  EXPECT_NE(e["error"]["message"].get<std::string>().find("get_weather"), std::string::npos) << e;
  e = post(head + R"(,"tool_choice":"sometimes"})", 400);
  EXPECT_EQ(e["error"]["param"], "tool_choice");
  e = post(R"({"model":"tiny","messages":[{"role":"user","content":"hi"}],"tool_choice":"required"})", 400);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("no 'tools'"), std::string::npos) << e;
  // Named and required would need constrained decoding: refused with a 400 that says so (issue 41), on
  // chat completions, /v1/responses and /v1/messages alike.
  for (const char* tc : {R"("required")", R"({"type":"function","function":{"name":"get_weather"}})"}) {
    e = post(head + R"(,"tool_choice":)" + tc + "}", 400);
    EXPECT_EQ(e["error"]["param"], "tool_choice");
    EXPECT_NE(e["error"]["message"].get<std::string>().find("needs constrained decoding"), std::string::npos)
        << e;
  }
  e = post(
      R"({"model":"tiny","input":"hi","tools":[{"type":"function","name":"get_weather"}],"tool_choice":"required"})",
      400, "/v1/responses");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("needs constrained decoding"), std::string::npos)
      << e;
  e = post(
      R"({"model":"tiny","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"}})",
      400, "/v1/messages");
  EXPECT_EQ(e["type"], "error");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("needs constrained decoding"), std::string::npos)
      << e;
  e = post(
      R"({"model":"tiny","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}})",
      400);
  EXPECT_EQ(e["error"]["param"], "response_format.type");
  json ok = post(head + R"(,"tool_choice":"auto"})", 200);
  EXPECT_EQ(ok["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  // No tools in the request: nothing is parsed as a call, reasoning still is.
  ok = post(R"({"model":"tiny","messages":[{"role":"user","content":"hi"}]})", 200);
  EXPECT_FALSE(ok["choices"][0]["message"].contains("tool_calls"));
  EXPECT_EQ(ok["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(ok["choices"][0]["message"]["reasoning_content"], "I should call the tool.");
}

// Issue 41: on /v1/messages a request over the window gets Anthropic's wording, which Claude Code parses
// (it retries with max_tokens = limit - input - 1000, and sizes compaction from "prompt is too long").
TEST_F(ToolServer, MessagesContextErrorsUseAnthropicWording) {
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}])";
  json counted = post(R"({"model":"tiny",)" + msgs + "}", 200, "/v1/messages/count_tokens");
  const int input = counted["input_tokens"].get<int>();
  json e = post(R"({"model":"tiny","max_tokens":2000,)" + msgs + "}", 400, "/v1/messages");
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["message"],
            "input length and `max_tokens` exceed context limit: " + std::to_string(input) +
                " + 2000 > 1024, decrease input length or `max_tokens` and try again");
  // What Claude Code does with it: parse the three numbers, retry below the limit.
  static const std::regex claude(
      R"(input length and `max_tokens` exceed context limit: (\d+) \+ (\d+) > (\d+))");
  std::smatch m;
  const std::string text = e["error"]["message"].get<std::string>();
  ASSERT_TRUE(std::regex_search(text, m, claude)) << text;
  const int retry = std::stoi(m[3]) - std::stoi(m[1]) - 1;
  json ok = post(R"({"model":"tiny","max_tokens":)" + std::to_string(retry) + "," + msgs + "}", 200,
                 "/v1/messages");
  EXPECT_EQ(ok["type"], "message");

  const std::string big(1100, 'a');
  e = post(R"({"model":"tiny","max_tokens":1,"messages":[{"role":"user","content":")" + big + R"("}]})", 400,
           "/v1/messages");
  static const std::regex too_long(R"(^prompt is too long: (\d+) tokens > 1024 maximum$)");
  const std::string t2 = e["error"]["message"].get<std::string>();
  ASSERT_TRUE(std::regex_match(t2, m, too_long)) << t2;
  EXPECT_GT(std::stoi(m[1]), 1100);
  // Chat completions keep OpenAI's wording.
  e = post(R"({"model":"tiny","max_tokens":2000,)" + msgs + "}", 400);
  EXPECT_NE(e["error"]["message"].get<std::string>().find("maximum context length is 1024"),
            std::string::npos)
      << e;
}

// Issue 41: /v1/responses counts the tokens of a reasoning item in output_tokens_details.
TEST_F(ToolServer, ResponsesCountReasoningTokens) {
  json r = post(
      R"({"model":"tiny","input":"hi","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]})",
      200, "/v1/responses");
  ASSERT_EQ(r["output"][0]["type"], "reasoning") << r;
  const std::string reasoning = r["output"][0]["summary"][0]["text"];
  const int counted = r["usage"]["output_tokens_details"]["reasoning_tokens"].get<int>();
  // The byte tokenizer makes a token of each byte: the reasoning text, its newlines and the closing
  // marker's bytes before its last (the token that ends reasoning is not counted).
  EXPECT_GE(counted, static_cast<int>(reasoning.size())) << r["usage"];
  EXPECT_LE(counted, static_cast<int>(reasoning.size()) + 2 + 8) << r["usage"];
  EXPECT_LT(counted, r["usage"]["output_tokens"].get<int>());
}

TEST_F(ToolServer, RequestChatTemplateKwargsOverrideTheServerDefault) {
  // The line template writes "[think]" (7 bytes = 7 tokens) when enable_thinking is true: the server
  // default turns it on, the request's own kwargs turn it off.
  json on = post(R"({"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":1})", 200);
  json off = post(
      R"({"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":1,"chat_template_kwargs":{"enable_thinking":false}})",
      200);
  EXPECT_EQ(on["usage"]["prompt_tokens"].get<int>(), off["usage"]["prompt_tokens"].get<int>() + 7);
  // /v1/completions is raw text: no parser touches it.
  json c = post(R"({"model":"tiny","prompt":"x","max_tokens":12})", 200, "/v1/completions");
  EXPECT_EQ(c["choices"][0]["text"], kScript.substr(0, 12));
}

}  // namespace
}  // namespace spk::rt
