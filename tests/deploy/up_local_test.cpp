// (a) `up lane-demo` on the implicit one-node local cluster with the real runtime (CPU, synthetic
// Qwen3-tiny): a real chat completion with the API key, `status` shows it, `up` again is "already up",
// `logs` shows rank 0's lines, `down` leaves no process, no pidfile and no shm segment.
#include <gtest/gtest.h>

#include "orchestrator/deploy/readiness.h"
#include "orchestrator/node/runtime_procs.h"
#include "orchestrator/node/shm_segments.h"
#include "tests/deploy/deploy_test_support.h"

namespace spk {
namespace {

using namespace deploy_test;
using nlohmann::json;
namespace fs = std::filesystem;

TEST(UpLocal, LaneDemoServesAChatCompletionThenDownLeavesNothing) {
  const std::string dir = temp_dir("up-local");
  ASSERT_FALSE(dir.empty());
  const std::string state = dir + "/state", recipes = dir + "/recipes", shm = dir + "/shm";
  fs::create_directories(recipes);
  fs::create_directories(shm);
  auto demo = read_file(std::string(SPARKCTL_TEST_DATA_DIR) + "/../../recipes/lane-demo.yaml");
  ASSERT_TRUE(demo.ok());
  const int port = free_port();
  // The embedded lane-demo with ports of its own (another test or demo may hold 8000).
  ASSERT_TRUE(write_file_atomic(recipes + "/lane-demo.yaml",
                                *demo + "port: " + std::to_string(port) +
                                    "\nmaster_port: " + std::to_string(free_port()) + "\n")
                  .ok());
  const std::string env = "SPARKCTL_STATE_DIR=" + state + " SPARKCTL_RECIPES_DIR=" + recipes +
                          " SPARKCTL_SHM_DIR=" + shm + " SPARKCTL_NPM_DIR=" + SPARKCTL_NPM_DIR + " ";

  auto up = test::run_sparkctl("up lane-demo --no-drop-caches --ready-timeout 300", env);
  ASSERT_EQ(up.code, 0) << up.out;
  EXPECT_NE(up.out.find("preflight: ok"), std::string::npos) << up.out;
  EXPECT_NE(up.out.find("launch_rank0"), std::string::npos) << up.out;
  EXPECT_NE(up.out.find("warmup 1"), std::string::npos) << up.out;
  std::cout << up.out;

  auto key = read_file(state + "/deploy/api_key");
  ASSERT_TRUE(key.ok());
  std::string k = *key;
  while (!k.empty() && k.back() == '\n') k.pop_back();
  auto ep = parse_endpoint("http://127.0.0.1:" + std::to_string(port) + "/v1");
  ASSERT_TRUE(ep.ok());
  auto n = chat_completion(*ep, k, "demo", 8, 6, std::chrono::seconds(120));
  ASSERT_TRUE(n.ok()) << n.error().what();
  EXPECT_GE(*n, 1);
  auto wrong = chat_completion(*ep, "not-the-key", "demo", 8, 2, std::chrono::seconds(30));
  EXPECT_FALSE(wrong.ok());

  json st = status_json(env);
  ASSERT_EQ(st.value("phase", ""), "ready") << st.dump(2);
  ASSERT_EQ(st["ranks"].size(), 1u);
  const int pid = st["ranks"][0]["pid"];
  const int sup = st["supervisor"]["pid"];
  EXPECT_TRUE(st["ranks"][0]["alive"].get<bool>());
  EXPECT_GT(st["ranks"][0]["kv_tokens"].get<int64_t>(), 0) << st.dump(2);
  EXPECT_TRUE(st["supervisor"]["alive"].get<bool>());
  EXPECT_EQ(test::run_sparkctl("status", env).code, 0);

  auto again = test::run_sparkctl("up lane-demo --no-drop-caches", env);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_NE(again.out.find("already up"), std::string::npos) << again.out;
  EXPECT_EQ(status_json(env)["ranks"][0]["pid"], pid) << "reused, not relaunched";

  auto logs = test::run_sparkctl("logs --node local", env);
  EXPECT_EQ(logs.code, 0) << logs.out;
  EXPECT_NE(logs.out.find("[local/rank-0] ready:"), std::string::npos) << logs.out;

  auto down = test::run_sparkctl("down", env);
  ASSERT_EQ(down.code, 0) << down.out;
  EXPECT_FALSE(pid_alive(pid));
  EXPECT_FALSE(pid_alive(sup));
  EXPECT_TRUE(find_runtime_processes(state).empty()) << "a runtime of this state dir survived down";
  EXPECT_TRUE(find_shm_segments(shm).empty());
  for (const auto& e : fs::recursive_directory_iterator(state))
    EXPECT_NE(e.path().extension(), ".pid") << e.path();
  EXPECT_EQ(test::run_sparkctl("status", env).code, 1) << "stopped is not ready";
  kill_pidfiles(state);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace spk
