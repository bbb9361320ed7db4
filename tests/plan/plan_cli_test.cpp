// `sparkctl plan` and `sparkctl cluster show` through the real binary: output and exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/run_binary.h"

namespace {

using spk::test::Run;

Run run(const std::string& args, bool merge_stderr = true) {
  return spk::test::run_sparkctl(args, "SPARKCTL_STATE_DIR=/tmp/spk-plan-state ", merge_stderr);
}

const std::string kSparks = std::string(PLAN_FIXTURES) + "/sparks.yaml";

TEST(PlanCli, LaneDemoPrintsAReadablePlan) {
  auto r = run("plan lane-demo");
  EXPECT_EQ(r.code, 0) << r.out;
  for (const char* want : {"plan for lane-demo", "preflight", "fabric_setup [local]: skipped", "synth-model",
                           "runtime serve", "--device-memory-gib 2", "wait_ready", "warmup"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
}

TEST(PlanCli, JsonIsOneDocument) {
  auto r = run("plan lane-demo --json", false);
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["lane"], "lane-demo");
  EXPECT_EQ(j["ranks"][0]["argv"][1], "runtime");
  EXPECT_EQ(j["ranks"][0]["argv"][2], "serve");
}

TEST(PlanCli, MultiNodeLaneNeedsAnInventory) {
  auto r = run("plan lane-a");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("needs 2 nodes"), std::string::npos) << r.out;
  auto ok = run("--cluster " + kSparks + " plan lane-a");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("spark-b"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("not honoured by this build"), std::string::npos) << ok.out;
}

TEST(PlanCli, BadInputsExitOneAndUsageExitsTwo) {
  EXPECT_EQ(run("plan lane-nope").code, 1);
  EXPECT_EQ(run("--cluster /no/such/cluster.yaml plan lane-demo").code, 1);
  EXPECT_EQ(run("plan").code, 2);
}

TEST(ClusterCli, ShowLocalAndFileInventories) {
  auto l = run("cluster show");
  EXPECT_EQ(l.code, 0) << l.out;
  EXPECT_NE(l.out.find("local"), std::string::npos);
  auto f = run("cluster show --json --cluster " + kSparks, false);
  ASSERT_EQ(f.code, 0) << f.out;
  auto j = nlohmann::json::parse(f.out);
  EXPECT_EQ(j["nodes"][0]["name"], "spark-a");
  auto bad = run("cluster show --cluster " + std::string(PLAN_FIXTURES) + "/bad_cluster.yaml");
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("did you mean 'port'?"), std::string::npos) << bad.out;
  EXPECT_EQ(run("cluster").code, 2);
}

}  // namespace
