// CLI exit codes: the exit code is the truth. Runs the real binary.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

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

// Issue 27: CLI habits.
TEST(CliHabits, UnknownVerbSaysWhichWasMeant) {
  for (auto [word, verb] :
       std::vector<std::pair<std::string, std::string>>{{"ps", "status"},
                                                        {"run", "up"},
                                                        {"stop", "down"},
                                                        {"stauts", "status"},
                                                        {"--state-dir /tmp swich", "switch"}}) {
    auto r = run(word);
    EXPECT_EQ(r.code, 2) << word << ": " << r.out;
    EXPECT_NE(r.out.find("did you mean `sparkctl " + verb + "`"), std::string::npos) << word << ": " << r.out;
  }
  auto far = run("frobnicate");
  EXPECT_NE(far.out.find("unknown verb 'frobnicate'"), std::string::npos) << far.out;
  EXPECT_NE(far.out.find("sparkctl --help"), std::string::npos) << far.out;
}

TEST(CliHabits, BareGroupPrintsItsHelp) {
  for (auto [group, sub] : std::vector<std::pair<std::string, std::string>>{
           {"recipe", "validate"}, {"fabric", "doctor"}, {"gmu", "bisect"}, {"cluster", "show"}}) {
    auto r = run(group);
    EXPECT_EQ(r.code, 2) << group << ": nothing ran: " << r.out;
    EXPECT_NE(r.out.find(sub), std::string::npos) << group << ": " << r.out;
    EXPECT_EQ(r.out.find("required"), std::string::npos) << group << ": " << r.out;
  }
}

// --json: stdout is exactly one JSON object, errors included (usage errors, unknown verbs, verb errors).
TEST(CliHabits, JsonErrorsAreOneObject) {
  for (const char* args :
       {"--json ps", "--json up", "--json recipe show no-such-lane", "--json --state-dir /nonexistent/x logs",
        "--json plan no-such-lane", "--json --state-dir /nonexistent/x down --bogus"}) {
    auto r = spk::test::run_sparkctl(args, "", /*merge_stderr=*/false);
    EXPECT_NE(r.code, 0) << args;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << args << ": stdout is not one JSON object: " << r.out;
    EXPECT_EQ(j.value("ok", true), false) << args << ": " << r.out;
    EXPECT_FALSE(j.value("error", "").empty()) << args << ": " << r.out;
  }
}

// Issue 43 item 4: an argument that is not UTF-8 (a lane name, a path, --cluster, --state-dir) still
// gets one JSON object on stdout and the verb's usual exit code, not `terminate called` (134). Each
// command runs twice, '@' replaced by the invalid byte 0xC3 and by a plain 'Z': same exit code.
TEST(CliHabits, JsonSurvivesArgumentsThatAreNotUtf8) {
  const std::string state = "/tmp/spk_cli_utf8_" + std::to_string(::getpid());
  const std::string env = "SPARKCTL_STATE_DIR=" + state + " ";
  for (const std::string args : {
           "--json recipe show 'dir/nope@.yaml'",
           "--json recipe show 'lane@'",
           "--json recipe validate '/nonexistent/r@.yaml'",
           "--json plan 'lane@'",
           "--json up 'lane@'",
           "--json stage 'lane@' --verify",
           "--json 'fr@b'",
           "--json --cluster '/nonexistent/c@.yaml' status",
           "--json --cluster '/nonexistent/c@.yaml' cluster show",
           "--json --cluster '/nonexistent/c@.yaml' plan lane-demo",
           "--json --state-dir '/nonexistent/s@' logs",
           "--json --state-dir '/nonexistent/s@' status",
           "--json --state-dir '/nonexistent/s@' down",
       }) {
    std::string bad = args, plain = args;
    bad.replace(bad.find('@'), 1, "\xc3");
    plain.replace(plain.find('@'), 1, "Z");
    const auto rb = spk::test::run_sparkctl(bad, env, /*merge_stderr=*/false);
    const auto rp = spk::test::run_sparkctl(plain, env, /*merge_stderr=*/false);
    EXPECT_NE(rb.code, -1) << args << ": killed by a signal";
    EXPECT_NE(rb.code, 134) << args;
    EXPECT_EQ(rb.code, rp.code) << args << ": " << rb.out << " vs " << rp.out;
    auto j = nlohmann::json::parse(rb.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << args << ": stdout is not one JSON object: " << rb.out;
  }
  // The path is named, its invalid byte shown as U+FFFD.
  auto r = spk::test::run_sparkctl("--json recipe show 'dir/nope\xc3.yaml'", env, false);
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_NE(j.value("error", "").find("dir/nope\xEF\xBF\xBD.yaml"), std::string::npos) << r.out;
  std::filesystem::remove_all(state);
}

TEST(CliHabits, VersionCarriesTheBuildHash) {
  auto r = run("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find(std::string("sparkctl ") + SPARKCTL_VERSION + " (build "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("(build )"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(spk::test::run_sparkctl("--json --version", "", false).out, nullptr, false);
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j.value("version", ""), SPARKCTL_VERSION);
  EXPECT_FALSE(j.value("build", "").empty());
}

// scripts/demo.sh builds the one binary the demo runs, not the whole test build.
TEST(DemoScript, BuildsOnlyTheBinary) {
  std::ifstream f(std::string(SPARKCTL_SOURCE_DIR) + "/scripts/demo.sh");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  ASSERT_FALSE(text.empty());
  EXPECT_NE(text.find("SPARKCTL_NO_BUILD=1 scripts/setup.sh"), std::string::npos) << text;
  EXPECT_NE(text.find("cmake --build \"$BUILD\" --target sparkctl"), std::string::npos) << text;
  size_t builds = 0;
  for (size_t at = text.find("cmake --build"); at != std::string::npos;
       at = text.find("cmake --build", at + 1))
    ++builds;
  EXPECT_EQ(builds, 1u) << "one build command, for the sparkctl target";
}

}  // namespace
