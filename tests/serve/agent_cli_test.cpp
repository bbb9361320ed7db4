// Issue 41: the stock agent CLIs from npm, with their default settings, complete a turn against the real
// `sparkctl runtime serve` (harness: agent_cli.h). Codex CLI (`codex exec`, a custom model provider with
// wire_api "responses") sends namespace tools and hosted web_search: a plain answer, then a scripted
// tool call that Codex runs before the next request carries its output and the turn ends. Claude Code
// (`claude -p`) asks max_tokens 32000 beside a prompt of ~12k tokens: on a 40,960-token window the first
// request is refused in Anthropic's wording and Claude Code retries with a max_tokens that fits.
// Each test skips when its CLI is not installed (scripts/setup.sh installs both from scripts/npm).
#include "tests/serve/agent_cli.h"

#include <gtest/gtest.h>

#include <string>

namespace spk::test::agents {
namespace {

using nlohmann::json;

// A HOME with Codex's config: a custom provider at `url`, telemetry and update checks off.
fs::path codex_home(const std::string& name, const std::string& url) {
  const fs::path home = temp_root() / name;
  write_file(home / ".codex" / "config.toml",
             "model = \"tiny\"\n"
             "model_provider = \"sparkctl\"\n"
             "check_for_update_on_startup = false\n"
             "[model_providers.sparkctl]\n"
             "name = \"sparkctl\"\n"
             "base_url = \"" +
                 url +
                 "/v1\"\n"
                 "env_key = \"SPK_AGENT_KEY\"\n"
                 "wire_api = \"responses\"\n"
                 "request_max_retries = 0\n"
                 "stream_max_retries = 0\n"
                 "[analytics]\n"
                 "enabled = false\n"
                 "[otel]\n"
                 "exporter = \"none\"\n");
  fs::create_directories(home / "work");
  return home;
}

CliRun codex_exec(const fs::path& home, const std::string& flags, const std::string& prompt) {
  return run("cd " + (home / "work").string() + " && timeout 300 " + clean_env(home) +
             "CODEX_HOME=" + (home / ".codex").string() + " SPK_AGENT_KEY=" + kKey + " " + npm_bin("codex") +
             " exec --skip-git-repo-check " + flags + " '" + prompt + "' </dev/null");
}

TEST(AgentCli, CodexExecWithDefaultSettingsPrintsThePlainAnswer) {
  if (npm_bin("codex").empty()) GTEST_SKIP() << skip_reason("codex");
  AgentServer s;
  ASSERT_TRUE(s.start({"<think>\nA greeting.\n</think>\n\nHello from sparkctl."}, 40960)) << s.server_log();
  const CliRun r = codex_exec(codex_home("codex-plain", s.url()), "", "say hello");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Hello from sparkctl."), std::string::npos) << r.out;
  const auto ex = s.exchanges("/v1/responses");
  ASSERT_FALSE(ex.empty());
  const json& first = ex.front();
  EXPECT_EQ(first["status"], 200) << first.dump().substr(0, 2000);
  bool has_namespace = false, has_hosted = false;
  for (const auto& t : first["request"]["tools"]) {
    has_namespace |= t.value("type", "") == "namespace";
    has_hosted |= t.value("type", "").rfind("web_search", 0) == 0;
  }
  EXPECT_TRUE(has_namespace) << "Codex no longer sends namespace tools: this test checks less than it says";
  EXPECT_TRUE(has_hosted) << "Codex no longer sends web_search: this test checks less than it says";
  EXPECT_EQ(s.stop(), 0);
}

TEST(AgentCli, CodexRunsAScriptedToolCallAndTheNextRequestCarriesItsOutput) {
  if (npm_bin("codex").empty()) GTEST_SKIP() << skip_reason("codex");
  AgentServer s;
  ASSERT_TRUE(s.start({"<tool_call>\n{\"name\": \"exec_command\", \"arguments\": {\"cmd\": \"echo "
                       "sparkctl-tool-ran\"}}\n</tool_call>",
                       "The command printed sparkctl-tool-ran."},
                      40960))
      << s.server_log();
  // Full access: the test needs the command to run, and Codex's sandbox (bubblewrap) needs user
  // namespaces that a CI container may not grant. The command only echoes.
  const CliRun r =
      codex_exec(codex_home("codex-tool", s.url()), "--sandbox danger-full-access", "run the echo");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("The command printed sparkctl-tool-ran."), std::string::npos) << r.out;
  const auto ex = s.exchanges("/v1/responses");
  ASSERT_EQ(ex.size(), 2u) << r.out;
  EXPECT_EQ(ex[0]["status"], 200);
  EXPECT_EQ(ex[1]["status"], 200);
  // The second request sends back the call and its output, tied by call_id.
  std::string call_id, output;
  for (const auto& it : ex[1]["request"]["input"]) {
    if (it.value("type", "") == "function_call" && it.value("name", "") == "exec_command")
      call_id = it.value("call_id", "");
    if (it.value("type", "") == "function_call_output" && !call_id.empty() &&
        it.value("call_id", "") == call_id)
      output = it["output"].is_string() ? it["output"].get<std::string>() : it["output"].dump();
  }
  EXPECT_FALSE(call_id.empty()) << ex[1]["request"]["input"].dump().substr(0, 4000);
  EXPECT_NE(output.find("sparkctl-tool-ran"), std::string::npos) << output;
  EXPECT_EQ(s.stop(), 0);
}

CliRun claude_p(const fs::path& home, const std::string& url, const std::string& prompt) {
  fs::create_directories(home / "work");
  return run("cd " + (home / "work").string() + " && timeout 300 " + clean_env(home) +
             "ANTHROPIC_BASE_URL=" + url + " ANTHROPIC_API_KEY=" + kKey +
             " ANTHROPIC_MODEL=tiny ANTHROPIC_SMALL_FAST_MODEL=tiny ANTHROPIC_DEFAULT_HAIKU_MODEL=tiny"
             " ANTHROPIC_DEFAULT_SONNET_MODEL=tiny ANTHROPIC_DEFAULT_OPUS_MODEL=tiny"
             " DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 DISABLE_ERROR_REPORTING=1 DISABLE_BUG_COMMAND=1"
             " CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 " +
             npm_bin("claude") + " -p '" + prompt + "' </dev/null");
}

// The tiny Qwen3's window is its 40,960 positions: Claude Code's default max_tokens (32000) beside its
// prompt never fits, so its plain answer always goes through the recovery.
TEST(AgentCli, ClaudeCodePrintsThePlainAnswerAfterRecoveringFromMaxTokensOverTheWindow) {
  if (npm_bin("claude").empty()) GTEST_SKIP() << skip_reason("claude");
  AgentServer s;
  ASSERT_TRUE(s.start({"Hello from sparkctl."}, 40960)) << s.server_log();
  const CliRun r = claude_p(temp_root() / "claude-window", s.url(), "say hello");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Hello from sparkctl."), std::string::npos) << r.out;
  // The main turn's first request (the one with tools) is refused in Anthropic's wording; a later one
  // with a smaller max_tokens succeeds.
  bool refused = false, recovered = false;
  std::string seen;
  for (const auto& e : s.exchanges("/v1/messages")) {
    const std::string error = e.contains("error") ? e["error"].dump() : "";
    seen += std::to_string(e["status"].get<int>()) + " " + error.substr(0, 300) + "\n";
    if (!e["request"].is_object() || !e["request"].contains("tools")) continue;
    if (e["status"] == 400 &&
        error.find("input length and `max_tokens` exceed context limit") != std::string::npos)
      refused = true;
    if (refused && e["status"] == 200) recovered = true;
  }
  EXPECT_TRUE(refused) << "the first request fit: this test checks less than it says\n" << seen;
  EXPECT_TRUE(recovered) << seen;
  EXPECT_EQ(s.stop(), 0);
}

}  // namespace
}  // namespace spk::test::agents
