// (b) A 3-node cluster of real sshd instances on 127.0.0.2/3/4 (tests/support/sshd_harness.h), one rank
// per node. The runtime is the stand-in tests/support/fake_serve.cpp (SPARKCTL_RUNTIME_STANDIN) until TP > 1
// lands in `runtime serve` (then tests/deploy/up_tp2_test.cpp runs the real one). Checks: an unknown host
// key is refused until --accept-new-host-key; `up` serves a chat completion; `kill -9` of a worker rank ->
// the supervisor stops every rank, relaunches worker-first, and `status` shows the restart; a live
// deployment with another fingerprint is refused (fix: switch); `switch` leaves no process of the old
// deployment; `restart` relaunches every rank; `down` leaves none at all; a changed host key is refused
// before anything starts.
#include <gtest/gtest.h>

#include "orchestrator/deploy/readiness.h"
#include "orchestrator/node/runtime_procs.h"
#include "tests/deploy/deploy_test_support.h"
#include "tests/support/sshd_harness.h"

namespace spk {
namespace {

using namespace deploy_test;
using nlohmann::json;
namespace fs = std::filesystem;

std::string recipe(const std::string& name, int port) {
  return standin_lane(name, port,
                      "description: \"orchestration test: 3 nodes x 1 rank, runtime stand-in\"\n"
                      "tensor_parallel: 3\nnodes: 3\n"
                      "warmup:\n  - {prompt_tokens: 8, max_tokens: 2}\n"
                      "  - {prompt_tokens: 64, max_tokens: 4, repeat: 2}\n");
}

std::vector<int> rank_pids(const json& st) {
  std::vector<int> out;
  for (const auto& r : st.value("ranks", json::array())) out.push_back(r.value("pid", 0));
  return out;
}

TEST(UpMultinode, SupervisedThreeNodeDeploymentSwitchDownAndHostKeys) {
  auto c = testing::SshdCluster::start({"127.0.0.2", "127.0.0.3", "127.0.0.4"});
  if (!c.ok()) GTEST_SKIP() << "sshd cannot run here: " << c.error().what();
  auto& cl = **c;
  const std::string dir = cl.dir();
  ASSERT_TRUE(write_sshd_inventory(cl, "loop3"));
  const int port = free_port(), port2 = free_port();
  ASSERT_TRUE(write_file_atomic(dir + "/lane-fake.yaml", recipe("lane-fake", port)).ok());
  ASSERT_TRUE(write_file_atomic(dir + "/lane-fake2.yaml", recipe("lane-fake2", port2)).ok());
  fs::create_directories(dir + "/shm");
  const std::string env = "SPARKCTL_STATE_DIR=" + dir + "/head SPARKCTL_CLUSTER=" + dir +
                          "/cluster.yaml SPARKCTL_RUNTIME_STANDIN=" + SPK_FAKE_SERVE +
                          " SPARKCTL_SHM_DIR=" + dir +
                          "/shm SPARKCTL_RESTART_BACKOFF_MS=200 SPARKCTL_SUPERVISE_POLL_MS=1000 ";
  DownOnExit cleanup{env, dir};
  const std::string lane = dir + "/lane-fake.yaml", lane2 = dir + "/lane-fake2.yaml";

  auto refused = test::run_sparkctl("up " + lane + " --no-drop-caches", env);
  EXPECT_EQ(refused.code, 1) << refused.out;
  EXPECT_NE(refused.out.find("unknown host key"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("--accept-new-host-key"), std::string::npos) << refused.out;

  auto up = test::run_sparkctl("up " + lane + " --no-drop-caches --accept-new-host-key", env);
  ASSERT_EQ(up.code, 0) << up.out;
  std::cout << up.out;
  // No RDMA on loopback nodes: the fabric gate's one-line verdict per node, and a cpu lane goes on.
  for (const char* n : {"n2", "n3", "n4"})
    EXPECT_NE(
        up.out.find(std::string("fabric_doctor: ") + n + ": no RDMA NIC: TP across nodes would use Gloo/TCP"),
        std::string::npos)
        << up.out;
  // Worker ranks are launched before rank 0.
  EXPECT_LT(up.out.find("rank 1 on n3"), up.out.find("rank 0 on n2")) << up.out;
  EXPECT_LT(up.out.find("rank 2 on n4"), up.out.find("rank 0 on n2")) << up.out;
  json st = status_json(env);
  ASSERT_EQ(st.value("phase", ""), "ready") << st.dump(2);
  ASSERT_EQ(st["ranks"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(st["ranks"][i]["node"], "n" + std::to_string(i + 2));
    EXPECT_TRUE(st["ranks"][i]["alive"].get<bool>()) << st.dump(2);
  }
  auto key = read_file(dir + "/head/deploy/api_key");
  ASSERT_TRUE(key.ok());
  const std::string k = key->substr(0, key->find('\n'));
  auto ep = parse_endpoint("http://127.0.0.1:" + std::to_string(port) + "/v1");
  ASSERT_TRUE(chat_completion(*ep, k, "fake", 4, 3, std::chrono::seconds(10)).ok());

  // kill -9 of a worker rank: the supervisor restores service, status shows the restart.
  const auto before = rank_pids(st);
  ASSERT_EQ(::kill(before[1], SIGKILL), 0);
  json after;
  const bool restored = eventually(
      [&] {
        after = status_json(env);
        if (after.value("phase", "") != "ready" || after["ranks"].size() != 3) return false;
        for (const auto& r : after["ranks"])
          if (!r["alive"].get<bool>() || r["restarts"].get<int>() < 1) return false;
        return true;
      },
      std::chrono::seconds(90));
  ASSERT_TRUE(restored) << after.dump(2);
  for (int pid : before)
    EXPECT_FALSE(pid_alive(pid)) << "every rank of the dead engine was restarted: " << pid;
  bool died = false, back = false;
  for (const auto& e : after["events"]) {
    died = died || e["kind"] == "rank_died";
    back = back || e["kind"] == "restored";
  }
  EXPECT_TRUE(died && back) << after.dump(2);
  EXPECT_TRUE(chat_completion(*ep, k, "fake", 4, 3, std::chrono::seconds(10)).ok());
  auto text = test::run_sparkctl("status", env);
  EXPECT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("restored"), std::string::npos) << text.out;

  // Another fingerprint while live: refused, the fix is switch.
  auto other = test::run_sparkctl("up " + lane2 + " --no-drop-caches", env);
  EXPECT_EQ(other.code, 1) << other.out;
  EXPECT_NE(other.out.find("sparkctl switch"), std::string::npos) << other.out;

  const auto old = rank_pids(status_json(env));
  auto sw = test::run_sparkctl("switch " + lane2 + " --no-drop-caches", env);
  ASSERT_EQ(sw.code, 0) << sw.out;
  for (int pid : old) EXPECT_FALSE(pid_alive(pid)) << "switch left pid " << pid << " of the old deployment";
  json st2 = status_json(env);
  EXPECT_EQ(st2.value("lane", ""), "lane-fake2");
  EXPECT_EQ(st2.value("phase", ""), "ready") << st2.dump(2);
  auto ep2 = parse_endpoint("http://127.0.0.1:" + std::to_string(port2) + "/v1");
  EXPECT_TRUE(chat_completion(*ep2, k, "fake", 4, 1, std::chrono::seconds(10)).ok());

  // restart: every rank stopped and relaunched worker-first, same deployment.
  const auto pre_restart = rank_pids(st2);
  auto re = test::run_sparkctl("restart", env);
  ASSERT_EQ(re.code, 0) << re.out;
  st2 = status_json(env);
  EXPECT_EQ(st2.value("phase", ""), "ready") << st2.dump(2);
  for (int pid : pre_restart) EXPECT_FALSE(pid_alive(pid)) << "restart left pid " << pid;
  for (const auto& r : st2["ranks"]) EXPECT_TRUE(r["alive"].get<bool>()) << st2.dump(2);

  auto logs = test::run_sparkctl("logs", env);
  EXPECT_EQ(logs.code, 0);
  for (const char* p : {"[n2/rank-0]", "[n3/rank-1]", "[n4/rank-2]"})
    EXPECT_NE(logs.out.find(p), std::string::npos) << logs.out;

  const auto last = rank_pids(st2);
  const int sup = st2["supervisor"]["pid"];
  auto down = test::run_sparkctl("down", env);
  ASSERT_EQ(down.code, 0) << down.out;
  for (int pid : last) EXPECT_FALSE(pid_alive(pid));
  EXPECT_FALSE(pid_alive(sup));

  // A changed host key is a hard error, before anything is launched anywhere.
  ASSERT_TRUE(cl.rotate_host_key(2).ok());
  auto changed = test::run_sparkctl("up " + lane + " --no-drop-caches --accept-new-host-key", env);
  EXPECT_EQ(changed.code, 1) << changed.out;
  EXPECT_NE(changed.out.find("HOST KEY CHANGED"), std::string::npos) << changed.out;
  for (size_t i = 0; i < cl.size(); ++i)
    for (const auto& e : fs::recursive_directory_iterator(cl.node(i).root + "/state"))
      EXPECT_NE(e.path().extension(), ".pid") << e.path();
}

}  // namespace
}  // namespace spk
