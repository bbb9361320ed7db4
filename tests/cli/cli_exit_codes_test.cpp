// CLI exit codes: the exit code is the truth. Runs the real binary.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace {

struct Run {
  int code;
  std::string out;
};

Run run(const std::string& args) {
  std::string cmd = std::string(SPARKCTL_BINARY) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

TEST(CliExitCodes, HelpIsZero) {
  auto r = run("--help");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("up"), std::string::npos);
}

TEST(CliExitCodes, NoVerbIsUsage) { EXPECT_EQ(run("").code, 2); }

TEST(CliExitCodes, UnknownVerbIsUsage) { EXPECT_EQ(run("frobnicate").code, 2); }

TEST(CliExitCodes, NotBuiltVerbSaysSoAndExitsTwo) {
  auto r = run("gmu bisect lane-a");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("not built yet"), std::string::npos) << r.out;
}

TEST(CliExitCodes, VersionIsZero) {
  auto r = run("--version");
  EXPECT_EQ(r.code, 0);
  EXPECT_NE(r.out.find(SPARKCTL_VERSION), std::string::npos);
}

}  // namespace
