// `sparkctl gmu bisect lane-demo` against the real CPU runtime with a RAM budget (lane-demo:
// --device-memory-gib 2): the chosen G must equal the known answer computed here, independently, from
// the planner's inputs (one --dry-run-memory of the plan's own rank-0 argv) by brute force over the
// 0.001 grid, and the two confirming boots must report the planned KV size. Also: --write's file,
// the MemAvailable floor and an unreachable target (exit 1, the knob named).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "../support/run_binary.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using spk::test::run_sparkctl;

struct State {
  fs::path dir = fs::temp_directory_path() / ("gmu-binary-test-" + std::to_string(::getpid()));
  std::string env() const { return "SPARKCTL_STATE_DIR=" + dir.string() + " "; }
  ~State() { fs::remove_all(dir); }
} g_state;

// The planner, redone here: smallest 3-decimal G whose whole blocks hold `target` tokens.
double known_answer(const json& p, int64_t target) {
  const double device = p["device_bytes"].get<double>();
  const double fixed = p["weight_bytes"].get<double>() + p["activation_bytes"].get<double>() +
                       p["graph_bytes"].get<double>() + p["other_bytes"].get<double>();
  const double block = p["kv_bytes_per_token"].get<double>() * p["block_size"].get<int>();
  for (int m = 700; m <= 950; ++m) {
    const double budget = device * (m / 1000.0) - fixed;
    if (budget >= 0 && std::floor(budget / block) * p["block_size"].get<int>() >= target) return m / 1000.0;
  }
  return -1;
}

TEST(GmuBinary, KnownAnswerOnTheCpuRuntime) {
  // lane-demo plans ~8 MiB of activations and 512 KV bytes a token in its 2 GiB: 3M tokens need G ~0.76.
  const int64_t target = 3000000;
  auto r = run_sparkctl(
      "--json gmu bisect lane-demo --kv-target 3000000 --mem-floor-gib 0 --write --boot-timeout 60",
      g_state.env(), false);
  ASSERT_EQ(r.code, 0) << r.out;
  json rep = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(rep.is_discarded()) << r.out;

  // The plan's rank-0 argv, dry-run by this test (the checkpoint exists now: bisect ran its synth step).
  auto pl = run_sparkctl("--json plan lane-demo", g_state.env(), false);
  ASSERT_EQ(pl.code, 0) << pl.out;
  json argv = json::parse(pl.out)["ranks"][0]["argv"];
  std::string args;
  for (size_t i = 1; i < argv.size(); ++i) args += "'" + argv[i].get<std::string>() + "' ";
  auto dr = run_sparkctl(args + " --dry-run-memory", g_state.env(), false);
  ASSERT_EQ(dr.code, 0) << dr.out;
  const double expect = known_answer(json::parse(dr.out), target);
  ASSERT_GT(expect, 0.7) << "the target must land inside the window for this test to mean anything";

  EXPECT_NEAR(rep["analytic_gmu"].get<double>(), expect, 1e-9) << rep.dump(2);
  EXPECT_NEAR(rep["chosen_gmu"].get<double>(), expect, 1e-9) << rep.dump(2);
  EXPECT_GE(rep["chosen_kv_tokens"].get<int64_t>(), target);
  EXPECT_EQ(rep["boots"].get<int>(), 2);
  int booted = 0;
  for (const auto& row : rep["rows"])
    if (row["source"] == "boot" && row["outcome"] == "booted") ++booted;
  EXPECT_EQ(booted, 2) << rep.dump(2);  // the chosen G and one step above

  std::ifstream f(g_state.dir / "gmu" / "lane-demo.json");
  ASSERT_TRUE(f.good());
  json w = json::parse(f);
  EXPECT_EQ(w["lane"], "lane-demo");
  EXPECT_NEAR(w["gmu"].get<double>(), expect, 1e-9);
  EXPECT_EQ(w["kv_tokens"], rep["chosen_kv_tokens"]);
  EXPECT_EQ(w["nodes"], json::array({"local"}));
  EXPECT_TRUE(w["model_revision"].is_string());
}

TEST(GmuBinary, TableShowsTheChosenValueToThreeDecimals) {
  auto r = run_sparkctl("gmu bisect lane-demo --kv-target 800000 --mem-floor-gib 0 --no-boot", g_state.env());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("GMU"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("headroom GiB"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chosen gpu-memory-utilization: 0."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not confirmed by a real boot"), std::string::npos) << r.out;
}

TEST(GmuBinary, FloorAndUnreachableTargetFailWithTheKnob) {
  auto floor = run_sparkctl("gmu bisect lane-demo --kv-target 800000 --mem-floor-gib 1000000", g_state.env());
  EXPECT_EQ(floor.code, 1) << floor.out;
  EXPECT_NE(floor.out.find("MemAvailable floor"), std::string::npos) << floor.out;
  auto big = run_sparkctl("gmu bisect lane-demo --kv-target 100000000 --mem-floor-gib 0", g_state.env());
  EXPECT_EQ(big.code, 1) << big.out;
  EXPECT_NE(big.out.find("raise --max"), std::string::npos) << big.out;
}

}  // namespace
