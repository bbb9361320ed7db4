// CLI exit codes: the exit code is the truth. Runs the real binary.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/run_binary.h"

namespace {

using spk::test::Run;

Run run(const std::string& args) { return spk::test::run_sparkctl(args); }

TEST(CliExitCodes, HelpIsZero) {
  auto r = run("--help");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("up"), std::string::npos);
}

TEST(CliExitCodes, NoVerbIsUsage) { EXPECT_EQ(run("").code, 2); }

TEST(CliExitCodes, UnknownVerbIsUsage) { EXPECT_EQ(run("frobnicate").code, 2); }

TEST(CliExitCodes, VersionIsZero) {
  auto r = run("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find(SPARKCTL_VERSION), std::string::npos);
}

}  // namespace

namespace {

// Issue 29: a recipe that `recipe validate` accepts but that holds a non-UTF-8 byte (a Latin-1
// description) must not end a --json verb with `terminate called` (nlohmann's type_error 316): the
// byte is printed as U+FFFD and the output is valid JSON.
TEST(CliExitCodes, JsonVerbsSurviveNonUtf8RecipeText) {
  const std::string dir = "/tmp/sparkctl-cli-utf8-" + std::to_string(::getpid());
  const std::string file = dir + "/latin1.yaml";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  {
    std::FILE* src = std::fopen(SPARKCTL_SOURCE_DIR "/recipes/lane-demo.yaml", "rb");
    ASSERT_NE(src, nullptr);
    std::string text;
    std::array<char, 4096> b{};
    size_t n;
    while ((n = std::fread(b.data(), 1, b.size(), src)) > 0) text.append(b.data(), n);
    std::fclose(src);
    const std::string from = "description: \"demo: one local node, CPU, synthetic tiny qwen3\"";
    const auto at = text.find(from);
    ASSERT_NE(at, std::string::npos);
    text.replace(at, from.size(), "description: \"caf\xe9 \xff demo\"");  // Latin-1 e-acute, a lone 0xff
    std::FILE* out = std::fopen(file.c_str(), "wb");
    ASSERT_NE(out, nullptr);
    std::fwrite(text.data(), 1, text.size(), out);
    std::fclose(out);
  }
  const std::string env = "SPARKCTL_STATE_DIR=" + dir + "/state ";
  auto plain = spk::test::run_sparkctl("recipe validate " + file, env);
  EXPECT_EQ(plain.code, 0) << plain.out;
  for (const std::string verb : {"recipe validate ", "recipe show "}) {
    auto r = spk::test::run_sparkctl("--json " + verb + file, env, /*merge_stderr=*/false);
    EXPECT_EQ(r.code, 0) << verb << r.out;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << verb << r.out;
    EXPECT_EQ(r.out.find("terminate called"), std::string::npos);
  }
  auto show = spk::test::run_sparkctl("--json recipe show " + file, env, false);
  EXPECT_NE(show.out.find("caf\xef\xbf\xbd \xef\xbf\xbd demo"), std::string::npos) << show.out;
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
