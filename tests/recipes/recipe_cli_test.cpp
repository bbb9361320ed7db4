// `sparkctl recipe ...` through the real binary: the exit code is the truth.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/run_binary.h"

namespace {

using spk::test::Run;

Run run(const std::string& args, bool merge_stderr = true) {
  return spk::test::run_sparkctl(args, "SPARKCTL_STATE_DIR=/nonexistent-spk-state ", merge_stderr);
}

const std::string kFix = RECIPES_FIXTURES;

TEST(RecipeCli, ListShowsEveryShippedLane) {
  auto r = run("recipe list");
  EXPECT_EQ(r.code, 0) << r.out;
  for (const char* lane : {"lane-a", "lane-b", "lane-c", "lane-demo"})
    EXPECT_NE(r.out.find(lane), std::string::npos);
  EXPECT_NE(r.out.find("embedded"), std::string::npos) << r.out;
  auto j = run("recipe list --json", false);
  ASSERT_EQ(j.code, 0);
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_GE(doc.size(), 4u);
  EXPECT_EQ(doc[0].count("tensor_parallel"), 1u);
}

TEST(RecipeCli, ValidateExitsZeroForValidAndOneForInvalid) {
  EXPECT_EQ(run("recipe validate " + kFix + "/valid_pinned.yaml").code, 0);
  auto bad = run("recipe validate " + kFix + "/bad_ranges.yaml");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("bad_ranges.yaml:5:25: gpu_memory_utilization: 1.3 is out of range (0,1]"),
            std::string::npos)
      << bad.out;
  EXPECT_EQ(run("recipe validate /no/such/file.yaml").code, 1);
}

TEST(RecipeCli, ValidateReportsNotHonouredButStaysZero) {
  auto r = run("recipe validate lane-a");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("not honoured by this build"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("warning: model.revision: not pinned"), std::string::npos) << r.out;
  auto j = run("--json recipe validate lane-a", false);
  ASSERT_EQ(j.code, 0);
  auto doc = nlohmann::json::parse(j.out);
  EXPECT_TRUE(doc["valid"].get<bool>());
  EXPECT_EQ(doc["not_honoured"].get<int>(), 4);
}

TEST(RecipeCli, ShowPrintsResolvedDefaults) {
  auto r = run("recipe show lane-demo");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("block_size: 16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("backend: cpu"), std::string::npos) << r.out;
  auto j = run("recipe show lane-demo --json", false);
  ASSERT_EQ(j.code, 0);
  EXPECT_EQ(nlohmann::json::parse(j.out)["model"]["synthetic"]["preset"], "tiny");
  EXPECT_EQ(run("recipe show lane-nope").code, 1);
}

TEST(RecipeCli, UsageErrorsExitTwo) {
  EXPECT_EQ(run("recipe").code, 2);
  EXPECT_EQ(run("recipe validate").code, 2);
  EXPECT_EQ(run("recipe frob").code, 2);
}

// Hostile files end in a clean error (exit 1), with or without --json: a device is refused at once
// (it used to be read forever), and invalid UTF-8 never reaches the JSON output (it used to abort).
TEST(RecipeCli, DevicesAndInvalidUtf8AreRefusedCleanly) {
  auto z = run("recipe validate /dev/zero");
  EXPECT_EQ(z.code, 1) << z.out;
  EXPECT_NE(z.out.find("not a regular file"), std::string::npos) << z.out;
  const std::string f = ::testing::TempDir() + "/spk_bad_utf8_" + std::to_string(::getpid()) + ".yaml";
  {
    FILE* out = std::fopen(f.c_str(), "wb");
    ASSERT_NE(out, nullptr);
    std::fputs("name: spk_bad_utf8\ndescription: \"\xff\xfe\"\n", out);
    std::fclose(out);
  }
  auto j = run("--json recipe validate " + f, false);
  EXPECT_EQ(j.code, 1) << j.out;
  auto doc = nlohmann::json::parse(j.out, nullptr, false);
  ASSERT_FALSE(doc.is_discarded()) << j.out;
  EXPECT_FALSE(doc["valid"].get<bool>());
  EXPECT_NE(doc.dump().find("invalid UTF-8"), std::string::npos) << j.out;
  std::remove(f.c_str());
}

}  // namespace
