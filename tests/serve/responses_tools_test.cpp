// /v1/responses tools as Codex sends them (responses_tools.h): namespace tools flattened and mapped back,
// hosted tools dropped and reported, custom and unknown types refused by name.
#include <gtest/gtest.h>

#include "runtime/serve/response_store.h"
#include "runtime/serve/responses_api.h"

namespace spk::rt {
namespace {

using nlohmann::json;

const char* kCodexLike = R"({"model":"tiny","input":[
  {"type":"message","role":"user","content":[{"type":"input_text","text":"q"}]},
  {"type":"function_call","call_id":"c1","namespace":"multi_agent_v1","name":"spawn_agent","arguments":"{\"message\":\"go\"}"},
  {"type":"function_call_output","call_id":"c1","output":"spawned"}],
  "tools":[{"type":"function","name":"exec_command","parameters":{"type":"object"},"strict":false},
   {"type":"namespace","name":"multi_agent_v1","description":"Sub-agents.","tools":[
     {"type":"function","name":"spawn_agent","description":"Spawn one.","parameters":{"type":"object"}},
     {"type":"function","name":"wait_agent","parameters":{"type":"object"}}]},
   {"type":"web_search","external_web_access":true},{"type":"image_generation"}],
  "tool_choice":"auto","store":false})";

ResponsesRequest parse_ok(const std::string& body) {
  auto r = parse_responses_request(body, "tiny");
  EXPECT_TRUE(std::holds_alternative<ResponsesRequest>(r)) << std::get<FieldError>(r).message;
  return std::holds_alternative<ResponsesRequest>(r) ? std::get<ResponsesRequest>(r) : ResponsesRequest{};
}

std::string refusal(const std::string& body, std::string* param = nullptr) {
  auto r = parse_responses_request(body, "tiny");
  if (!std::holds_alternative<FieldError>(r)) return "accepted";
  if (param) *param = std::get<FieldError>(r).param;
  return std::get<FieldError>(r).message;
}

TEST(ResponsesTools, NamespaceToolsAreFlattenedAndHistoryRendersUnderTheFlatName) {
  ResponsesRequest q = parse_ok(kCodexLike);
  ResponseStore store(2);
  ASSERT_FALSE(resolve_history(q, store));
  ASSERT_EQ(q.api.tools.size(), 3u);  // exec_command + two namespaced; the hosted ones are not offered
  EXPECT_EQ(q.api.tools[0]["function"]["name"], "exec_command");
  EXPECT_EQ(q.api.tools[1]["function"]["name"], "multi_agent_v1__spawn_agent");
  EXPECT_EQ(q.api.tools[1]["function"]["description"], "Sub-agents.\nSpawn one.");
  EXPECT_EQ(q.api.tools[2]["function"]["name"], "multi_agent_v1__wait_agent");
  const auto& m = q.api.messages;
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["name"], "multi_agent_v1__spawn_agent");
  EXPECT_EQ(m[1]["tool_calls"][0]["function"]["arguments"]["message"], "go");
}

TEST(ResponsesTools, ParsedCallsOfAFlatNameComeBackWithTheirNamespace) {
  ResponsesRequest q = parse_ok(kCodexLike);
  ChoiceOutput out;
  out.tool_calls.push_back({"call_a", "multi_agent_v1__wait_agent", "{}"});
  out.tool_calls.push_back({"call_b", "exec_command", R"({"cmd":"ls"})"});
  out.finish_reason = "tool_calls";
  const json items = response_output(out, q.tools);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0]["type"], "function_call");
  EXPECT_EQ(items[0]["name"], "wait_agent");
  EXPECT_EQ(items[0]["namespace"], "multi_agent_v1");
  EXPECT_EQ(items[1]["name"], "exec_command");
  EXPECT_FALSE(items[1].contains("namespace"));
  // The stored conversation (previous_response_id) renders it under the flat name again.
  EXPECT_EQ(output_as_messages(items)[0]["tool_calls"][0]["function"]["name"], "multi_agent_v1__wait_agent");

  // Streamed: the item opened for the call carries the namespace too.
  ResponsesStream s("resp_1", 1, "tiny", q);
  std::string ev = s.begin();
  ev += s.push({OutputDelta::Kind::tool_call_begin, "", 0, "call_a", "multi_agent_v1__wait_agent"});
  ev += s.push({OutputDelta::Kind::tool_call_arguments, "{}", 0});
  ChoiceOutput one;
  one.tool_calls.push_back(out.tool_calls[0]);
  one.finish_reason = "tool_calls";
  ev += s.finish(one, Usage{5, 3});
  const json& done = s.final_response();
  ASSERT_EQ(done["output"].size(), 1u);
  EXPECT_EQ(done["output"][0]["namespace"], "multi_agent_v1");
  EXPECT_EQ(done["output"][0]["name"], "wait_agent");
  EXPECT_NE(ev.find(R"("namespace":"multi_agent_v1")"), std::string::npos);
}

TEST(ResponsesTools, HostedToolsAreDroppedAndTheResponseSaysSo) {
  ResponsesRequest q = parse_ok(kCodexLike);
  ASSERT_EQ(q.tools.dropped.size(), 2u);
  EXPECT_EQ(q.tools.dropped[0]["index"], 2);
  EXPECT_EQ(q.tools.dropped[0]["type"], "web_search");
  EXPECT_EQ(q.tools.dropped[1]["type"], "image_generation");
  const json r = response_object("resp_1", 1, "tiny", q, "completed", json::array(), nullptr);
  EXPECT_EQ(r["dropped_tools"], q.tools.dropped);
  EXPECT_EQ(r["tools"].size(), 4u);  // echoed as sent
  // Only hosted tools: the model is offered none, and the turn goes on.
  ResponsesRequest only = parse_ok(R"({"model":"tiny","input":"x","tools":[{"type":"file_search"},
      {"type":"code_interpreter"},{"type":"computer_use_preview"},{"type":"mcp"},{"type":"local_shell"},
      {"type":"web_search_preview_2025_03_11"}]})");
  EXPECT_TRUE(only.api.tools.empty());
  EXPECT_EQ(only.tools.dropped.size(), 6u);
  const json plain = response_object("resp_2", 1, "tiny", parse_ok(R"({"model":"tiny","input":"x"})"),
                                     "completed", json::array(), nullptr);
  EXPECT_FALSE(plain.contains("dropped_tools"));
}

TEST(ResponsesTools, CustomUnknownAndCollidingToolsAreRefusedByName) {
  std::string param;
  std::string why = refusal(R"({"model":"tiny","input":"x","tools":[{"type":"custom","name":"apply_patch",
      "format":{"type":"grammar","syntax":"lark","definition":"start: x"}}]})",
                            &param);
  EXPECT_EQ(param, "tools[0].type");
  EXPECT_NE(why.find("'custom'"), std::string::npos) << why;
  why = refusal(R"({"model":"tiny","input":"x","tools":[{"type":"namespace","name":"n","tools":[
      {"type":"custom","name":"c"}]}]})",
                &param);
  EXPECT_EQ(param, "tools[0].tools[0].type");
  why = refusal(R"({"model":"tiny","input":"x","tools":[{"type":"teleport"}]})", &param);
  EXPECT_EQ(param, "tools[0].type");
  EXPECT_NE(why.find("'teleport'"), std::string::npos) << why;
  why = refusal(R"({"model":"tiny","input":"x","tools":[{"type":"function","name":"n__f"},
      {"type":"namespace","name":"n","tools":[{"type":"function","name":"f"}]}]})",
                &param);
  EXPECT_EQ(param, "tools[1].tools[0].name");
  EXPECT_NE(why.find("'n__f' is offered twice"), std::string::npos) << why;
  why = refusal(R"({"model":"tiny","input":"x","tools":[{"type":"namespace","name":"n"}]})", &param);
  EXPECT_EQ(param, "tools[0].tools");
}

}  // namespace
}  // namespace spk::rt
