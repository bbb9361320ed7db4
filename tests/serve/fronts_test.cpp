// /v1/messages and /v1/responses: request mapping, errors, response and stream builders, the LRU store.
#include <gtest/gtest.h>

#include "runtime/serve/messages_api.h"
#include "runtime/serve/response_store.h"
#include "runtime/serve/responses_api.h"

namespace spk::rt {
namespace {

using nlohmann::json;

TEST(MessagesApi, MapsSystemBlocksToolsAndToolResults) {
  auto r =
      parse_messages_request(R"({"model":"tiny","max_tokens":8,"system":[{"type":"text","text":"be brief"}],
    "messages":[{"role":"user","content":"hi"},
      {"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"x"},{"type":"text","text":"ok"},
        {"type":"tool_use","id":"toolu_1","name":"ls","input":{"d":"/"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"a b"}]},
        {"type":"text","text":"next"}]}],
    "tools":[{"name":"ls","description":"list","input_schema":{"type":"object"}}],
    "tool_choice":{"type":"auto"},"stop_sequences":["END"],"temperature":0,"top_k":5,"metadata":{"user_id":"u"}})",
                             "tiny");
  ASSERT_TRUE(std::holds_alternative<MessagesRequest>(r)) << std::get<FieldError>(r).message;
  const auto& q = std::get<MessagesRequest>(r);
  const auto& m = q.api.messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[2]["reasoning_content"], "hmm");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"]["d"], "/");
  EXPECT_EQ(m[3]["role"], "tool");
  EXPECT_EQ(m[3]["tool_call_id"], "toolu_1");
  EXPECT_EQ(m[3]["content"], "a b");
  EXPECT_EQ(m[4]["content"], "next");
  EXPECT_EQ(q.api.tools[0]["function"]["parameters"]["type"], "object");
  EXPECT_EQ(q.tool_choice, "auto");
  EXPECT_EQ(q.api.gen.max_tokens, 8);
  EXPECT_EQ(q.api.gen.stop, std::vector<std::string>{"END"});
}

TEST(MessagesApi, MalformedFieldsAreNamed) {
  auto param = [](const char* body) {
    auto r = parse_messages_request(body, "tiny");
    return std::holds_alternative<FieldError>(r) ? std::get<FieldError>(r).param : std::string("<accepted>");
  };
  EXPECT_EQ(param(R"({"model":"tiny","messages":[{"role":"user","content":"x"}]})"), "max_tokens");
  EXPECT_EQ(
      param(R"({"model":"tiny","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image"}]}]})"),
      "messages.0.content.0.type");
  EXPECT_EQ(
      param(R"({"model":"tiny","max_tokens":1,"temperature":3,"messages":[{"role":"user","content":"x"}]})"),
      "temperature");
  EXPECT_EQ(param(R"({"model":"tiny","max_tokens":1,"messages":[{"role":"user","content":"x"}],
                      "tools":[{"type":"web_search_20250305","name":"w"}]})"),
            "tools.0.type");
  EXPECT_EQ(param(R"({"model":"nope","max_tokens":1,"messages":[]})"), "model");
  auto body = anthropic_error_body(FieldError{400, "x", "x: bad"});
  EXPECT_EQ(body["type"], "error");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
}

TEST(MessagesApi, StreamEventSequence) {
  MessagesStream s("msg_1", "tiny", 7);
  std::string ev = s.begin(Usage{7, 0});
  ev += s.push({OutputDelta::Kind::reasoning, "think"});
  ev += s.push({OutputDelta::Kind::content, "hi"});
  OutputDelta b{OutputDelta::Kind::tool_call_begin, "", 0, "call_a", "ls"};
  ev += s.push(b);
  ev += s.push({OutputDelta::Kind::tool_call_arguments, "{}", 0});
  ChoiceOutput out;
  out.tool_calls.push_back({"call_a", "ls", "{}"});
  out.finish_reason = "tool_calls";
  ev += s.finish(out, Usage{7, 3});
  std::vector<std::string> names;
  for (size_t p = 0; (p = ev.find("event: ", p)) != std::string::npos; p += 7)
    names.push_back(ev.substr(p + 7, ev.find('\n', p) - p - 7));
  const std::vector<std::string> want = {"message_start",       "content_block_start", "ping",
                                         "content_block_delta", "content_block_stop",  "content_block_start",
                                         "content_block_delta", "content_block_stop",  "content_block_start",
                                         "content_block_delta", "content_block_stop",  "message_delta",
                                         "message_stop"};
  EXPECT_EQ(names, want);
  EXPECT_NE(ev.find(R"("stop_reason":"tool_use")"), std::string::npos);
  EXPECT_NE(ev.find(R"("id":"toolu_a")"), std::string::npos);
  auto full = messages_response("msg_1", "tiny", out, Usage{7, 3});
  EXPECT_EQ(full["content"][0]["type"], "tool_use");
  EXPECT_EQ(full["usage"]["cache_read_input_tokens"], 0);
}

TEST(MessagesApi, StreamedUsageHasTheSameSplitAtStartAndEnd) {
  MessagesStream s("msg_1", "tiny", 40);
  std::string start = s.begin(Usage{40, 1, 32});
  ChoiceOutput out;
  out.content = "hi";
  out.finish_reason = "stop";
  std::string end = s.finish(out, Usage{40, 5, 32});
  auto data_of = [](const std::string& ev, const std::string& name) {
    const size_t e = ev.find("event: " + name + "\n");
    const size_t d = ev.find("data: ", e) + 6;
    return json::parse(ev.substr(d, ev.find('\n', d) - d));
  };
  const json u0 = data_of(start, "message_start")["message"]["usage"];
  const json u1 = data_of(end, "message_delta")["usage"];
  EXPECT_EQ(u0["input_tokens"], 8);
  EXPECT_EQ(u0["cache_read_input_tokens"], 32);
  EXPECT_EQ(u1["input_tokens"], u0["input_tokens"]);
  EXPECT_EQ(u1["cache_read_input_tokens"], u0["cache_read_input_tokens"]);
  EXPECT_EQ(u1["cache_creation_input_tokens"], 0);
  EXPECT_EQ(u1["output_tokens"], 5);
}

TEST(ResponsesApi, MapsItemsAndRefusesOtherToolTypes) {
  auto r = parse_responses_request(R"({"model":"tiny","instructions":"sys","input":[
      {"role":"developer","content":"dev"},{"type":"message","role":"user","content":[{"type":"input_text","text":"q"}]},
      {"type":"function_call","call_id":"c1","name":"ls","arguments":"{\"d\":1}"},
      {"type":"function_call_output","call_id":"c1","output":"out"}],
      "tools":[{"type":"function","name":"ls","parameters":{"type":"object"},"strict":true}],"max_output_tokens":5})",
                                   "tiny");
  ASSERT_TRUE(std::holds_alternative<ResponsesRequest>(r)) << std::get<FieldError>(r).message;
  auto q = std::get<ResponsesRequest>(r);
  ResponseStore store(2);
  ASSERT_FALSE(resolve_history(q, store));
  const auto& m = q.api.messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0]["content"], "sys");
  EXPECT_EQ(m[1]["role"], "system");
  EXPECT_EQ(m[3]["tool_calls"][0]["function"]["arguments"]["d"], 1);
  EXPECT_EQ(m[4]["role"], "tool");
  auto bad = parse_responses_request(
      R"({"model":"tiny","input":"x","tools":[{"type":"web_search"},{"type":"frobnicate"}]})", "tiny");
  ASSERT_TRUE(std::holds_alternative<FieldError>(bad));
  EXPECT_EQ(std::get<FieldError>(bad).param, "tools[1].type");
  EXPECT_NE(std::get<FieldError>(bad).message.find("'frobnicate'"), std::string::npos);
  auto prev =
      parse_responses_request(R"({"model":"tiny","input":"x","previous_response_id":"resp_x"})", "tiny");
  auto pq = std::get<ResponsesRequest>(prev);
  auto e = resolve_history(pq, store);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "previous_response_id");
  EXPECT_EQ(openai_error_body(*e)["error"]["code"], "previous_response_not_found");
}

TEST(ResponsesApi, StreamEventsAndStoreLru) {
  auto r = std::get<ResponsesRequest>(parse_responses_request(R"({"model":"tiny","input":"x"})", "tiny"));
  ResponsesStream s("resp_1", 1, "tiny", r);
  std::string ev = s.begin();
  ev += s.push({OutputDelta::Kind::content, "ab"});
  ev += s.push({OutputDelta::Kind::content, "c"});
  ChoiceOutput out;
  out.content = "abc";
  out.finish_reason = "length";
  ev += s.finish(out, Usage{2, 2});
  int seq = 0;
  for (size_t p = 0; (p = ev.find("\"sequence_number\":", p)) != std::string::npos; ++p)
    EXPECT_EQ(std::stoi(ev.substr(p + 18)), seq++);
  EXPECT_EQ(seq, 10);  // created, in_progress, item.added, part.added, 2 deltas, text.done, part.done,
                       // item.done, incomplete
  EXPECT_EQ(s.final_response()["status"], "incomplete");
  EXPECT_EQ(s.final_response()["output"][0]["content"][0]["text"], "abc");
  ResponseStore store(2);
  store.put("a", {});
  store.put("b", {});
  EXPECT_TRUE(store.get("a"));
  store.put("c", {});
  EXPECT_FALSE(store.get("b"));
  EXPECT_TRUE(store.get("a") && store.get("c"));
}

}  // namespace
}  // namespace spk::rt
