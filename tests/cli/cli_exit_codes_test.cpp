// CLI exit codes: the exit code is the truth. Runs the real binary.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
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
