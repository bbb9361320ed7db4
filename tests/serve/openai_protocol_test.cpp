// OpenAI request validation and response shapes.
#include "runtime/serve/openai_protocol.h"

#include <gtest/gtest.h>

#include <chrono>

#include "runtime/serve/messages_api.h"
#include "runtime/serve/responses_api.h"

namespace spk::rt {
namespace {

const ProtocolLimits kLim{"tiny", 4, 0};

ApiRequest ok(const std::string& body, bool chat) {
  auto r = parse_request(body, chat, kLim);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << " -> " << e->body().dump();
  return std::holds_alternative<ApiRequest>(r) ? std::get<ApiRequest>(r) : ApiRequest{};
}

ApiError bad(const std::string& body, bool chat) {
  auto r = parse_request(body, chat, kLim);
  if (std::holds_alternative<ApiRequest>(r)) {
    ADD_FAILURE() << body << " was accepted";
    return {};
  }
  return std::get<ApiError>(r);
}

TEST(OpenAiProtocol, ParsesACompletionRequest) {
  auto q = ok(R"({"model":"tiny","prompt":"hi","max_tokens":5,"temperature":0,"stop":["\n"],"seed":3,
                 "stream":true,"stream_options":{"include_usage":true},"n":2,"logprobs":0})",
              false);
  EXPECT_EQ(q.prompt, "hi");
  EXPECT_EQ(q.gen.max_tokens, 5);
  EXPECT_TRUE(q.max_tokens_given);
  EXPECT_EQ(q.gen.temperature, 0.0f);
  EXPECT_EQ(q.gen.stop, (std::vector<std::string>{"\n"}));
  EXPECT_EQ(q.gen.seed, 3u);
  EXPECT_TRUE(q.stream);
  EXPECT_TRUE(q.include_usage);
  EXPECT_EQ(q.n, 2);
  EXPECT_TRUE(q.logprobs);
}

TEST(OpenAiProtocol, TokenIdPromptAndDefaults) {
  auto q = ok(R"({"model":"tiny","prompt":[1,2,3]})", false);
  EXPECT_TRUE(q.prompt_is_ids);
  EXPECT_EQ(q.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(q.gen.max_tokens, 16);
  EXPECT_FALSE(q.max_tokens_given);
  EXPECT_FALSE(q.stream);
  EXPECT_EQ(q.n, 1);
}

TEST(OpenAiProtocol, ParsesAChatRequest) {
  auto q = ok(R"({"model":"tiny","messages":[{"role":"user","content":"hey"}],
                 "max_completion_tokens":7,"max_tokens":3,"chat_template_kwargs":{"enable_thinking":false},
                 "logprobs":true,"top_logprobs":0})",
              true);
  EXPECT_EQ(q.messages.size(), 1u);
  EXPECT_EQ(q.gen.max_tokens, 7);  // the new name wins
  EXPECT_EQ(q.chat_template_kwargs["enable_thinking"], false);
  EXPECT_TRUE(q.logprobs);
}

TEST(OpenAiProtocol, RejectsMalformedAndOutOfRange) {
  EXPECT_EQ(bad("{not json", false).status, 400);
  EXPECT_EQ(bad("[1,2]", false).status, 400);
  EXPECT_EQ(bad(std::string(100, '[') + std::string(100, ']'), false).status, 400);
  EXPECT_EQ(bad(R"({"prompt":"x"})", false).param, "model");
  auto e = bad(R"({"model":"other","prompt":"x"})", false);
  EXPECT_EQ(e.status, 404);
  EXPECT_EQ(e.code, "model_not_found");
  EXPECT_EQ(bad(R"({"model":"tiny"})", false).param, "prompt");
  EXPECT_EQ(bad(R"({"model":"tiny","prompt":"x","max_tokens":-1})", false).param, "max_tokens");
  EXPECT_EQ(bad(R"({"model":"tiny","prompt":"x","max_tokens":0})", false).param, "max_tokens");
  EXPECT_EQ(bad(R"({"model":"tiny","prompt":"x","max_tokens":"5"})", false).param, "max_tokens");
  EXPECT_EQ(bad(R"({"model":"tiny","prompt":"x","temperature":3})", false).param, "temperature");
  EXPECT_EQ(bad(R"({"model":"tiny","prompt":"x","top_p":0})", false).param, "top_p");
  EXPECT_EQ(bad(R"({"model":"tiny","prompt":"x","n":5})", false).param, "n");
  EXPECT_EQ(bad(R"({"model":"tiny","prompt":"x","stop":[1]})", false).param, "stop");
  EXPECT_EQ(bad(R"({"model":"tiny","prompt":"x","stop":["a","b","c","d","e"]})", false).param, "stop");
  EXPECT_EQ(bad(R"({"model":"tiny","prompt":[-1]})", false).param, "prompt");
  EXPECT_EQ(bad(R"({"model":"tiny","prompt":"x","logprobs":3})", false).param, "logprobs");
  EXPECT_EQ(bad(R"({"model":"tiny","prompt":"x","stream":"yes"})", false).param, "stream");
  EXPECT_EQ(bad(R"({"model":"tiny","messages":[]})", true).param, "messages");
  EXPECT_EQ(bad(R"({"model":"tiny","messages":[{"content":"x"}]})", true).param, "messages");
  EXPECT_EQ(
      bad(R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"chat_template_kwargs":1})", true)
          .param,
      "chat_template_kwargs");
  auto body = bad(R"({"model":"tiny","prompt":"x","temperature":3})", false).body();
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "temperature");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("[0, 2]"), std::string::npos);
}

// Issue 29: counts are read as 64-bit integers; values past 2^31 are kept (for the context check) and
// values past 2^63 are refused by name, never wrapped.
TEST(OpenAiProtocol, CountsAreReadIn64Bits) {
  EXPECT_EQ(ok(R"({"model":"tiny","prompt":"x","max_tokens":9223372036854775807})", false).gen.max_tokens,
            INT64_MAX);
  auto q =
      ok(R"({"model":"tiny","messages":[{"role":"user","content":"x"}],"max_completion_tokens":4294967296})",
         true);
  EXPECT_EQ(q.gen.max_tokens, 4294967296LL);
  EXPECT_EQ(q.max_tokens_param, "max_completion_tokens");
  EXPECT_EQ(*ok(R"({"model":"tiny","prompt":"x","seed":-1})", false).gen.seed, UINT64_MAX);
  EXPECT_EQ(*ok(R"({"model":"tiny","prompt":"x","seed":9223372036854775807})", false).gen.seed,
            static_cast<uint64_t>(INT64_MAX));
  for (const char* f : {"max_tokens", "n", "seed", "top_k", "logprobs", "best_of"}) {
    auto e = bad(std::string(R"({"model":"tiny","prompt":"x",")") + f + R"(":18446744073709551615})", false);
    EXPECT_EQ(e.param, f);
    EXPECT_NE(e.message.find("18446744073709551615"), std::string::npos) << e.message;
  }
  EXPECT_EQ(bad(R"({"model":"tiny","prompt":[2147483648]})", false).param, "prompt");
  EXPECT_EQ(bad(R"({"model":"tiny","prompt":"x","logit_bias":{"abc":1}})", false).param, "logit_bias");
  EXPECT_EQ(bad(R"({"model":"tiny","prompt":"x","logit_bias":[1]})", false).param, "logit_bias");
  auto lb = ok(R"({"model":"tiny","prompt":"x","logit_bias":{"17":-100,"3":2.5}})", false);
  ASSERT_EQ(lb.logit_bias.size(), 2u);
  EXPECT_EQ(bad(R"({"model":"tiny","prompt":"x","n":2,"best_of":1})", false).param, "best_of");
  EXPECT_EQ(ok(R"({"model":"tiny","prompt":"x","n":2,"best_of":2})", false).n, 2);
}

// Bodies are parsed into ordered_json (key order is what templates print), whose objects insert by
// linear search: an object of many keys is refused from a scan before any parse, on every API (issue 29).
TEST(OpenAiProtocol, ObjectsWithTooManyKeysAreRefusedBeforeParsing) {
  auto object_of = [](int n) {
    std::string o = "{";
    for (int i = 0; i < n; ++i) o += (i ? ",\"" : "\"") + std::to_string(i) + "\":1";
    return o + "}";
  };
  const std::string head = R"({"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":2,)";
  EXPECT_FALSE(json_shape_problem(head + "\"logit_bias\":" + object_of(4096) + "}").has_value());
  for (const std::string& body :
       {head + "\"logit_bias\":" + object_of(200000) + "}", head + "\"metadata\":" + object_of(4097) + "}"}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto e = bad(body, true);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_NE(e.message.find("more than 4096 keys"), std::string::npos) << e.message;
    EXPECT_LT(s, 1.0) << "refused from the scan, not after an O(keys^2) parse";
    auto m = parse_messages_request(body, "tiny");
    ASSERT_TRUE(std::holds_alternative<FieldError>(m));
    EXPECT_EQ(std::get<FieldError>(m).status, 400);
    auto r = parse_responses_request(R"({"model":"tiny","input":"hi","metadata":)" + object_of(5000) + "}",
                                     "tiny");
    ASSERT_TRUE(std::holds_alternative<FieldError>(r));
  }
  // Many objects of allowed size still add up: the scan bounds the total insertion work.
  std::string many = head + "\"metadata\":[";
  for (int i = 0; i < 8; ++i) many += (i ? "," : "") + object_of(4000);
  auto e = bad(many + "]}", true);
  EXPECT_NE(e.message.find("too many keys in all"), std::string::npos) << e.message;
  // Strings are skipped: a colon or brace inside one counts for nothing.
  EXPECT_FALSE(json_shape_problem(R"({"a":"{{{{:::::}}}}[[[["})").has_value());
}

bool says_constrained_decoding(const std::string& message) {
  return message.find("needs constrained decoding, which this server does not support yet") !=
         std::string::npos;
}

// Issue 41: a field that changes the output is never silently ignored. What needs constrained decoding
// (JSON mode, structured outputs, a forced tool call) is refused with a 400 that says so, on every route;
// an invalid value is named. Issue 43 item 7: min_tokens, top_logprobs, max_tool_calls are validated.
TEST(OutputConstraints, ChatCompletionsRefuseWhatNeedsConstrainedDecoding) {
  const std::string chat = R"({"model":"tiny","messages":[{"role":"user","content":"x"}],)";
  const std::string tools = R"("tools":[{"type":"function","function":{"name":"ls"}}],)";
  for (const std::string t : {"json_object", "json_schema"}) {
    auto e = bad(chat + R"("response_format":{"type":")" + t + R"(","json_schema":{"name":"a"}}})", true);
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "response_format.type");
    EXPECT_TRUE(says_constrained_decoding(e.message)) << e.message;
    EXPECT_NE(e.message.find("'" + t + "'"), std::string::npos) << e.message;
    EXPECT_EQ(bad(R"({"model":"tiny","prompt":"x","response_format":{"type":")" + t + R"("}})", false).param,
              "response_format.type");
  }
  ok(chat + R"("response_format":{"type":"text"}})", true);
  auto yaml = bad(chat + R"("response_format":{"type":"yaml"}})", true);
  EXPECT_EQ(yaml.param, "response_format.type");
  EXPECT_NE(yaml.message.find("'yaml' is not a format type"), std::string::npos) << yaml.message;
  EXPECT_EQ(bad(chat + R"("response_format":"json"})", true).param, "response_format");
  EXPECT_EQ(bad(chat + R"("response_format":{}})", true).param, "response_format.type");

  auto required = bad(chat + tools + R"("tool_choice":"required"})", true);
  EXPECT_EQ(required.param, "tool_choice");
  EXPECT_TRUE(says_constrained_decoding(required.message)) << required.message;
  EXPECT_NE(required.message.find("'required'"), std::string::npos) << required.message;
  auto named = bad(chat + tools + R"("tool_choice":{"type":"function","function":{"name":"ls"}}})", true);
  EXPECT_TRUE(says_constrained_decoding(named.message)) << named.message;
  EXPECT_NE(named.message.find("'ls'"), std::string::npos) << named.message;
  // Invalid choices keep their own messages.
  auto missing = bad(chat + tools + R"("tool_choice":{"type":"function","function":{"name":"cat"}}})", true);
  EXPECT_NE(missing.message.find("not in 'tools'"), std::string::npos) << missing.message;
  EXPECT_NE(bad(chat + R"("tool_choice":"required"})", true).message.find("no 'tools'"), std::string::npos);
  ok(chat + tools + R"("tool_choice":"auto"})", true);
  ok(chat + tools + R"("tool_choice":"none"})", true);

  ok(chat + R"("min_tokens":0})", true);
  for (const char* v : {"3", "\"3\"", "-1", "1.5"}) {
    EXPECT_EQ(bad(chat + R"("min_tokens":)" + v + "}", true).param, "min_tokens") << v;
    EXPECT_EQ(bad(std::string(R"({"model":"tiny","prompt":"x","min_tokens":)") + v + "}", false).param,
              "min_tokens")
        << v;
  }
  EXPECT_EQ(bad(chat + R"("top_logprobs":"2"})", true).param, "top_logprobs");
  EXPECT_EQ(bad(chat + R"("logprobs":true,"top_logprobs":2})", true).param, "top_logprobs");
}

TEST(OutputConstraints, ResponsesAndMessagesRefuseWhatNeedsConstrainedDecoding) {
  auto responses = [](const std::string& extra) {
    auto r = parse_responses_request(
        R"({"model":"tiny","input":"x","tools":[{"type":"function","name":"ls"}])" + extra + "}", "tiny");
    return std::holds_alternative<FieldError>(r) ? std::get<FieldError>(r) : FieldError{200, "", ""};
  };
  auto messages = [](const std::string& extra) {
    auto r =
        parse_messages_request(R"({"model":"tiny","max_tokens":4,"messages":[{"role":"user","content":"x"}],)"
                               R"("tools":[{"name":"ls","input_schema":{"type":"object"}}])" +
                                   extra + "}",
                               "tiny");
    return std::holds_alternative<FieldError>(r) ? std::get<FieldError>(r) : FieldError{200, "", ""};
  };
  for (const std::string& extra :
       {std::string(R"(,"tool_choice":"required")"),
        std::string(R"(,"tool_choice":{"type":"function","name":"ls"})"),
        std::string(R"(,"text":{"format":{"type":"json_schema","name":"a","schema":{}}})"),
        std::string(R"(,"text":{"format":{"type":"json_object"}})")}) {
    auto e = responses(extra);
    EXPECT_EQ(e.status, 400) << extra;
    EXPECT_TRUE(says_constrained_decoding(e.message)) << extra << " -> " << e.message;
  }
  EXPECT_EQ(responses(R"(,"tool_choice":"required")").param, "tool_choice");
  EXPECT_EQ(responses(R"(,"text":{"format":{"type":"json_object"}})").param, "text.format.type");
  EXPECT_NE(responses(R"(,"text":{"format":{"type":"yaml"}})").message.find("'yaml' is not a format type"),
            std::string::npos);
  EXPECT_NE(responses(R"(,"tool_choice":{"type":"function","name":"cat"})").message.find("'cat'"),
            std::string::npos);
  EXPECT_EQ(responses(R"(,"tool_choice":"auto","text":{"format":{"type":"text"}})").status, 200);
  EXPECT_EQ(responses(R"(,"top_logprobs":0,"max_tool_calls":3)").status, 200);
  EXPECT_EQ(responses(R"(,"top_logprobs":2)").param, "top_logprobs");
  EXPECT_EQ(responses(R"(,"top_logprobs":"2")").param, "top_logprobs");
  EXPECT_EQ(responses(R"(,"max_tool_calls":"3")").param, "max_tool_calls");
  EXPECT_EQ(responses(R"(,"max_tool_calls":0)").param, "max_tool_calls");
  auto rq = parse_responses_request(R"({"model":"tiny","input":"x","max_tool_calls":3})", "tiny");
  ASSERT_TRUE(std::holds_alternative<ResponsesRequest>(rq));
  EXPECT_EQ(response_object("resp_1", 1, "tiny", std::get<ResponsesRequest>(rq), "completed",
                            nlohmann::json::array(), nullptr)["max_tool_calls"],
            3);

  for (const std::string& extra :
       {std::string(R"(,"tool_choice":{"type":"any"})"),
        std::string(R"(,"tool_choice":{"type":"tool","name":"ls"})"),
        std::string(R"(,"output_config":{"format":{"type":"json_schema","schema":{}}})")}) {
    auto e = messages(extra);
    EXPECT_EQ(e.status, 400) << extra;
    EXPECT_TRUE(says_constrained_decoding(e.message)) << extra << " -> " << e.message;
  }
  EXPECT_EQ(messages(R"(,"tool_choice":{"type":"any"})").param, "tool_choice.type");
  EXPECT_NE(messages(R"(,"tool_choice":{"type":"any"})").message.find("'any'"), std::string::npos);
  EXPECT_NE(messages(R"(,"tool_choice":{"type":"tool","name":"cat"})")
                .message.find("not one of the request's tools"),
            std::string::npos);
  EXPECT_EQ(messages(R"(,"tool_choice":{"type":"auto"})").status, 200);
  EXPECT_EQ(messages(R"(,"tool_choice":{"type":"none"})").status, 200);
}

TEST(OpenAiProtocol, ResponseShapes) {
  Choice c;
  c.text = "hello";
  c.finish_reason = "length";
  c.token_texts = {"hel", "lo"};
  c.token_logprobs = {-0.5f, -1.0f};
  Usage u{3, 2};
  auto r = completion_response("cmpl-1", 10, "tiny", {c}, u, true);
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], "hello");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["choices"][0]["logprobs"]["token_logprobs"][1], -1.0f);
  EXPECT_EQ(r["usage"]["total_tokens"], 5);
  auto chat = chat_response("chatcmpl-1", 10, "tiny", {c}, u, false);
  EXPECT_EQ(chat["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(chat["choices"][0]["message"]["content"], "hello");
  EXPECT_TRUE(chat["choices"][0]["logprobs"].is_null());
  Choice d;
  d.text = "he";
  auto ch = chat_chunk("chatcmpl-1", 10, "tiny", d, true, false);
  EXPECT_EQ(ch["object"], "chat.completion.chunk");
  EXPECT_EQ(ch["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(ch["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(sse_event(nlohmann::json{{"a", 1}}), "data: {\"a\":1}\n\n");
  auto uc = usage_chunk("x", 1, "tiny", true, u);
  EXPECT_TRUE(uc["choices"].empty());
  EXPECT_EQ(uc["usage"]["completion_tokens"], 2);
  EXPECT_EQ(models_response("tiny", 1, 128)["data"][0]["id"], "tiny");
}

}  // namespace
}  // namespace spk::rt
