// `switch` never leaves the cluster worse off (issue 27). Two local nodes of one inventory (box-a head,
// box-b worker, TP 2), the runtime stand-in. Each failure that used to strand the cluster:
//   - no --cluster on switch: the deployment's own inventory is reused (as restart does);
//   - the new lane's port is in use, or the new lane does not fit / is not runnable: refused before
//     anything stops, the old lane keeps serving with the same pids;
//   - the new lane dies after the old one stopped: the old lane is brought back and serves again;
//   - and when the old one cannot come back either: the last line and `status` say nothing is serving.
#include <gtest/gtest.h>

#include "orchestrator/deploy/readiness.h"
#include "orchestrator/node/runtime_procs.h"
#include "tests/deploy/deploy_test_support.h"

namespace spk {
namespace {

using namespace deploy_test;
using nlohmann::json;
namespace fs = std::filesystem;

struct Pair {
  std::string dir, state, inv, env, env_no_standin;
  Pair() {
    dir = temp_dir("switch");
    state = dir + "/state";
    inv = dir + "/pair.yaml";
    fs::create_directories(dir + "/shm");
    std::string y = "name: pair\nnodes:\n";
    for (const char* n : {"a", "b"})
      y += std::string("  - {name: box-") + n + ", role: " + (n[0] == 'a' ? "head" : "worker") +
           ", local: true, cache_dir: " + dir + "/" + n + "/cache, state_dir: " + dir + "/" + n + "/state}\n";
    (void)write_file_atomic(inv, y);
    env_no_standin = "SPARKCTL_STATE_DIR=" + state + " SPARKCTL_SHM_DIR=" + dir + "/shm ";
    env = env_no_standin + "SPARKCTL_RUNTIME_STANDIN=" + SPK_FAKE_SERVE + " ";
  }
  ~Pair() {
    (void)test::run_sparkctl("down", env);
    kill_pidfiles(dir);
    fs::remove_all(dir);
  }
  // A TP-2 lane on both boxes; its engine dies at start while `fail_file` exists.
  std::string lane(const std::string& name, int port, const std::string& fail_file, int nodes = 2) const {
    const std::string path = dir + "/" + name + ".yaml";
    (void)write_file_atomic(
        path, standin_lane(name, port,
                           "tensor_parallel: " + std::to_string(nodes) + "\nnodes: " + std::to_string(nodes) +
                               "\nenv: {SPK_FAKE_START_FAIL_FILE: \"" + fail_file + "\"}\n"));
    return path;
  }
};

std::vector<int> rank_pids(const json& st) {
  std::vector<int> out;
  for (const auto& r : st.value("ranks", json::array())) out.push_back(r.value("pid", 0));
  return out;
}

std::string last_line(std::string s) {
  while (!s.empty() && s.back() == '\n') s.pop_back();
  return s.substr(s.rfind('\n') == std::string::npos ? 0 : s.rfind('\n') + 1);
}

bool serves(int port, const std::string& state) {
  auto key = read_file(state + "/deploy/api_key");
  if (!key) return false;
  std::string k = *key;
  while (!k.empty() && k.back() == '\n') k.pop_back();
  auto ep = parse_endpoint("http://127.0.0.1:" + std::to_string(port) + "/v1");
  return ep && chat_completion(*ep, k, "fake", 4, 1, std::chrono::seconds(10)).ok();
}

// The old lane serves with exactly the pids it had.
void expect_untouched(const Pair& p, const std::vector<int>& pids, int port) {
  json st = status_json(p.env);
  EXPECT_EQ(st.value("lane", ""), "lane-a") << st.dump(2);
  EXPECT_EQ(st.value("phase", ""), "ready") << st.dump(2);
  EXPECT_EQ(rank_pids(st), pids) << "the old lane's ranks were touched: " << st.dump(2);
  EXPECT_TRUE(serves(port, p.state));
}

TEST(Switch, RefusedBeforeStoppingAnythingThenReusesTheDeploymentsCluster) {
  Pair p;
  ASSERT_FALSE(p.dir.empty());
  const int port_a = free_port();
  const std::string a = p.lane("lane-a", port_a, p.dir + "/never");
  auto up =
      test::run_sparkctl("--cluster " + p.inv + " up " + a + " --no-drop-caches --ready-timeout 30", p.env);
  ASSERT_EQ(up.code, 0) << up.out;
  const auto pids = rank_pids(status_json(p.env));
  ASSERT_EQ(pids.size(), 2u);

  // A port of the new lane is in use (something else listens there).
  const int busy = free_port();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(busy);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  ASSERT_EQ(::listen(fd, 4), 0);
  auto sw = test::run_sparkctl("switch " + p.lane("lane-port", busy, p.dir + "/never") + " --no-drop-caches",
                               p.env);
  ::close(fd);
  EXPECT_EQ(sw.code, 1) << sw.out;
  EXPECT_NE(sw.out.find("refused before anything stopped"), std::string::npos) << sw.out;
  EXPECT_NE(sw.out.find("in use: " + std::to_string(busy)), std::string::npos) << sw.out;
  expect_untouched(p, pids, port_a);

  // A lane that does not fit the deployment's cluster (3 nodes on 2).
  sw = test::run_sparkctl(
      "switch " + p.lane("lane-big", free_port(), p.dir + "/never", 3) + " --no-drop-caches", p.env);
  EXPECT_EQ(sw.code, 1) << sw.out;
  EXPECT_NE(sw.out.find("refused before anything stopped"), std::string::npos) << sw.out;
  EXPECT_NE(sw.out.find("needs 3 nodes but cluster 'pair' has 2"), std::string::npos) << sw.out;
  expect_untouched(p, pids, port_a);

  // A lane `up` refuses: the embedded lane-a asks for what this build cannot honour (no stand-in here).
  sw = test::run_sparkctl("switch lane-a --no-drop-caches", p.env_no_standin);
  EXPECT_EQ(sw.code, 1) << sw.out;
  EXPECT_NE(sw.out.find("refused before anything stopped"), std::string::npos) << sw.out;
  EXPECT_NE(sw.out.find("cannot honour"), std::string::npos) << sw.out;
  expect_untouched(p, pids, port_a);

  // No --cluster: the deployment's inventory is used, not the implicit one-node cluster.
  const int port_b = free_port();
  sw = test::run_sparkctl(
      "switch " + p.lane("lane-b", port_b, p.dir + "/never") + " --no-drop-caches --ready-timeout 30", p.env);
  ASSERT_EQ(sw.code, 0) << sw.out;
  EXPECT_NE(sw.out.find("the deployment's inventory"), std::string::npos) << sw.out;
  json st = status_json(p.env);
  EXPECT_EQ(st.value("lane", ""), "lane-b") << st.dump(2);
  EXPECT_EQ(st.value("phase", ""), "ready") << st.dump(2);
  ASSERT_EQ(st["ranks"].size(), 2u);
  EXPECT_EQ(st["ranks"][1]["node"], "box-b");
  for (int pid : pids) EXPECT_FALSE(pid_alive(pid)) << "switch left pid " << pid;
  EXPECT_TRUE(serves(port_b, p.state));
}

TEST(Switch, NewLaneFailingAfterTheOldStoppedRollsBackOrSaysNothingServes) {
  Pair p;
  ASSERT_FALSE(p.dir.empty());
  const int port_a = free_port(), port_b = free_port();
  const std::string fail_a = p.dir + "/fail-a", fail_b = p.dir + "/fail-b";
  const std::string a = p.lane("lane-a", port_a, fail_a), b = p.lane("lane-b", port_b, fail_b);
  auto up =
      test::run_sparkctl("--cluster " + p.inv + " up " + a + " --no-drop-caches --ready-timeout 30", p.env);
  ASSERT_EQ(up.code, 0) << up.out;
  const auto pids = rank_pids(status_json(p.env));

  ASSERT_TRUE(write_file_atomic(fail_b, "").ok());  // lane-b's engine dies at start
  auto sw = test::run_sparkctl("switch " + b + " --no-drop-caches --ready-timeout 30", p.env);
  EXPECT_EQ(sw.code, 1) << sw.out;
  EXPECT_NE(sw.out.find("exited before ready"), std::string::npos) << sw.out;
  EXPECT_NE(last_line(sw.out).find("rolled back: lane-a serves again at"), std::string::npos) << sw.out;
  json st = status_json(p.env);
  EXPECT_EQ(st.value("lane", ""), "lane-a") << st.dump(2);
  EXPECT_EQ(st.value("phase", ""), "ready") << st.dump(2);
  EXPECT_NE(st.value("message", "").find("rolled back to lane-a"), std::string::npos) << st.dump(2);
  for (const auto& r : st["ranks"]) EXPECT_TRUE(r["alive"].get<bool>()) << st.dump(2);
  for (int pid : pids) EXPECT_FALSE(pid_alive(pid)) << "the old ranks were stopped, then relaunched";
  EXPECT_TRUE(serves(port_a, p.state));
  EXPECT_TRUE(st["supervisor"]["alive"].get<bool>()) << st.dump(2);

  // Now lane-a cannot come back either: nothing serves, and both the last line and status say so.
  ASSERT_TRUE(write_file_atomic(fail_a, "").ok());
  sw = test::run_sparkctl("switch " + b + " --no-drop-caches --ready-timeout 30", p.env);
  EXPECT_EQ(sw.code, 1) << sw.out;
  EXPECT_NE(last_line(sw.out).find("nothing is serving: switch to"), std::string::npos) << sw.out;
  st = status_json(p.env);
  EXPECT_EQ(st.value("phase", ""), "failed") << st.dump(2);
  EXPECT_EQ(st.value("message", "").rfind("nothing is serving:", 0), 0u) << st.dump(2);
  EXPECT_NE(test::run_sparkctl("status", p.env).out.find("nothing is serving"), std::string::npos);
}

}  // namespace
}  // namespace spk
