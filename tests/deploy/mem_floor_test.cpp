// The node's memory floor (issue 27; orchestrator/node/mem_floor.h): the judge needs consecutive low reads,
// the watch fires once from a meminfo file, exit notes travel through `node launch` / `node ps`, and end to
// end a real lane-demo rank whose (fake) MemAvailable drops below the recipe's mem_floor_gib stops itself;
// the supervisor records why, restarts nothing, and `status` says it.
#include "orchestrator/node/mem_floor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "kernels/base/fs.h"
#include "orchestrator/node/daemons.h"
#include "orchestrator/node/runtime_procs.h"
#include "tests/deploy/deploy_test_support.h"

namespace spk {
namespace {

using namespace deploy_test;
using nlohmann::json;
namespace fs = std::filesystem;

constexpr uint64_t kGiB = 1ull << 30;

std::string meminfo(double avail_gib) {
  return "MemTotal:       16777216 kB\nMemFree:          100000 kB\nMemAvailable:   " +
         std::to_string(static_cast<uint64_t>(avail_gib * 1024 * 1024)) + " kB\n";
}

TEST(MemFloor, JudgeActsOnConsecutiveLowReadsOnly) {
  MemFloorOptions o;
  o.floor_bytes = 4 * kGiB;
  o.samples = 2;
  MemFloorJudge j(o);
  EXPECT_FALSE(j.observe(3 * kGiB));
  EXPECT_FALSE(j.observe(5 * kGiB)) << "a blip is forgiven";
  EXPECT_FALSE(j.observe(3 * kGiB));
  EXPECT_TRUE(j.observe(1 * kGiB));
  const std::string m = j.message(1 * kGiB);
  EXPECT_NE(m.find("1.00 GiB"), std::string::npos) << m;
  EXPECT_NE(m.find("4.00 GiB"), std::string::npos) << m;
  EXPECT_NE(m.find("gpu_memory_utilization"), std::string::npos) << "names the knob: " << m;
  MemFloorJudge off(MemFloorOptions{});
  EXPECT_FALSE(off.observe(0)) << "floor 0 is off";
  EXPECT_FALSE(off.observe(0));
}

TEST(MemFloor, WatchFiresOnceFromTheMeminfoFile) {
  const std::string dir = temp_dir("memfloor-watch");
  ASSERT_FALSE(dir.empty());
  const std::string path = dir + "/meminfo";
  ASSERT_TRUE(write_file_atomic(path, meminfo(8)).ok());
  MemFloorOptions o;
  o.floor_bytes = 2 * kGiB;
  o.meminfo_path = path;
  o.period = std::chrono::milliseconds(20);
  std::atomic<int> fired{0};
  std::string why;
  {
    MemFloorWatch w(o, [&](const std::string& m) {
      why = m;
      ++fired;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(fired, 0) << "8 GiB is above the floor";
    ASSERT_TRUE(write_file_atomic(path, meminfo(0.5)).ok());
    EXPECT_TRUE(eventually([&] { return fired == 1; }, std::chrono::seconds(5)));
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(fired, 1) << "once";
  EXPECT_NE(why.find("0.50 GiB"), std::string::npos) << why;
  fs::remove_all(dir);
}

TEST(MemFloor, ExitNoteTravelsThroughNodeLaunchAndPs) {
  const std::string dir = temp_dir("memfloor-note");
  ASSERT_FALSE(dir.empty());
  NodeEnv env;
  env.node_root = dir;
  const std::string script =
      "printf '{\"reason\":\"mem_floor\",\"message\":\"low\"}' > \"$SPARKCTL_EXIT_NOTE\"; exit 3";
  auto launch = node_launch(json{{"dir", dir}, {"name", "rank-0"}, {"argv", {"/bin/sh", "-c", script}}}, env);
  ASSERT_EQ(launch.exit_code, 0) << launch.body.dump();
  json d;
  ASSERT_TRUE(eventually(
      [&] {
        auto ps = node_ps(json{{"dir", dir}}, env);
        d = ps.body["daemons"].empty() ? json() : ps.body["daemons"][0];
        return d.is_object() && !d["alive"].get<bool>() && d.contains("exit_note");
      },
      std::chrono::seconds(10)))
      << d.dump();
  EXPECT_EQ(d["exit_note"]["reason"], "mem_floor");
  EXPECT_EQ(d["exit_note"]["message"], "low");
  // The next launch of the same name starts without the old note.
  auto again = node_launch(json{{"dir", dir}, {"name", "rank-0"}, {"argv", {"/bin/sleep", "30"}}}, env);
  ASSERT_EQ(again.exit_code, 0) << again.body.dump();
  EXPECT_FALSE(fs::exists(exit_note_path(dir, "rank-0")));
  (void)node_stop(json{{"dir", dir}, {"grace_ms", 1000}}, env);
  fs::remove_all(dir);
}

// End to end with the real CPU runtime: lane-demo with mem_floor_gib 1 and MemAvailable read from a file.
TEST(MemFloor, RankStopsAtItsFloorAndTheSupervisorDoesNotRestartIt) {
  const std::string dir = temp_dir("memfloor-up");
  ASSERT_FALSE(dir.empty());
  const std::string state = dir + "/state", recipes = dir + "/recipes", mi = dir + "/meminfo";
  fs::create_directories(recipes);
  fs::create_directories(dir + "/shm");
  ASSERT_TRUE(write_file_atomic(mi, meminfo(8)).ok());
  auto demo = read_file(std::string(SPARKCTL_TEST_DATA_DIR) + "/../../recipes/lane-demo.yaml");
  ASSERT_TRUE(demo.ok());
  ASSERT_TRUE(write_file_atomic(recipes + "/lane-demo.yaml",
                                *demo + "port: " + std::to_string(free_port()) +
                                    "\nmaster_port: " + std::to_string(free_port()) +
                                    "\nmem_floor_gib: 1\nenv: {SPARKCTL_MEMINFO_PATH: \"" + mi + "\"}\n")
                  .ok());
  const std::string env = "SPARKCTL_STATE_DIR=" + state + " SPARKCTL_RECIPES_DIR=" + recipes +
                          " SPARKCTL_SHM_DIR=" + dir + "/shm SPARKCTL_NPM_DIR=" + SPARKCTL_NPM_DIR +
                          " SPARKCTL_SUPERVISE_POLL_MS=300 SPARKCTL_RESTART_BACKOFF_MS=200 ";
  DownOnExit cleanup{env, state};
  auto plan = test::run_sparkctl("--json plan lane-demo", env, /*merge_stderr=*/false);
  ASSERT_EQ(plan.code, 0) << plan.out;
  EXPECT_NE(plan.out.find("\"--mem-floor-gib\""), std::string::npos) << plan.out;
  auto up = test::run_sparkctl("up lane-demo --no-drop-caches --ready-timeout 300", env);
  ASSERT_EQ(up.code, 0) << up.out;
  json st = status_json(env);
  ASSERT_EQ(st.value("phase", ""), "ready") << st.dump(2);
  const int sup = st["supervisor"]["pid"];

  ASSERT_TRUE(write_file_atomic(mi, meminfo(0.25)).ok());  // the node runs short of memory
  auto has_event = [](const json& s, const char* kind) {
    for (const auto& e : s.value("events", json::array()))
      if (e["kind"] == kind) return true;
    return false;
  };
  ASSERT_TRUE(eventually(
      [&] {
        st = status_json(env);
        return has_event(st, "mem_floor") && st.value("phase", "") == "stopped";
      },
      std::chrono::seconds(30)))
      << st.dump(2);
  EXPECT_NE(st.value("message", "").find("memory floor"), std::string::npos) << st.dump(2);
  EXPECT_NE(st.value("message", "").find("0.25 GiB"), std::string::npos) << st.dump(2);
  EXPECT_EQ(st["ranks"][0]["phase"], "mem_floor") << "the rank that stopped at its floor: " << st.dump(2);
  EXPECT_TRUE(eventually([&] { return !pid_alive(sup); }, std::chrono::seconds(10)))
      << "the supervisor exits";
  std::this_thread::sleep_for(std::chrono::seconds(1));
  st = status_json(env);
  EXPECT_FALSE(has_event(st, "restart")) << "no restart into the same floor: " << st.dump(2);
  EXPECT_FALSE(st["ranks"][0]["alive"].get<bool>());
  auto text = test::run_sparkctl("status", env);
  EXPECT_NE(text.out.find("mem_floor"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("not serving"), std::string::npos) << text.out;
  auto logs = test::run_sparkctl("logs --node local --bytes 65536", env);
  EXPECT_NE(logs.out.find("below the memory floor"), std::string::npos) << logs.out;
  EXPECT_EQ(test::run_sparkctl("down", env).code, 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace spk
