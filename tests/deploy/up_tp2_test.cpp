// TP=2 `up` with the real runtime (no stand-in): a lane-demo-style lane (CPU, synthetic Qwen3-tiny)
// with one rank on each of 2 sshd nodes (127.0.0.2/3): Gloo rendezvous at rank 0, a real chat
// completion, kill -9 of the worker rank -> the supervisor restores service, `down` leaves nothing. `up`
// stages the head's checkpoint to the worker and its fabric gate gives the no-RDMA verdict on loopback.
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

TEST(UpTp2, LaneDemoTp2OverTwoSshdNodesServesAndSurvivesAWorkerKill) {
  auto c = testing::SshdCluster::start({"127.0.0.2", "127.0.0.3"});
  if (!c.ok()) GTEST_SKIP() << "sshd cannot run here: " << c.error().what();
  auto& cl = **c;
  const std::string dir = cl.dir();
  ASSERT_TRUE(write_sshd_inventory(cl, "loop2"));
  const int port = free_port();
  const std::string lane = dir + "/lane-demo-tp2.yaml";
  ASSERT_TRUE(
      write_file_atomic(lane,
                        "name: lane-demo-tp2\nbackend: cpu\n"
                        "model:\n  synthetic: {arch: qwen3, preset: tiny, tokenizer: qwen3, seed: 1}\n"
                        "  served_name: demo\n"
                        "tensor_parallel: 2\nnodes: 2\ndevice_memory_gib: 4\nmax_model_len: 2048\n"
                        "max_num_seqs: 4\nmax_num_batched_tokens: 2048\n"
                        "port: " +
                            std::to_string(port) + "\nmaster_port: " + std::to_string(free_port()) +
                            "\nchat_template_kwargs: {enable_thinking: false}\n"
                            "warmup:\n  - {prompt_tokens: 16, max_tokens: 4}\n")
          .ok());
  fs::create_directories(dir + "/shm");
  const std::string env = "SPARKCTL_STATE_DIR=" + dir + "/head SPARKCTL_CLUSTER=" + dir + "/cluster.yaml" +
                          " SPARKCTL_SHM_DIR=" + dir + "/shm SPARKCTL_NPM_DIR=" + SPARKCTL_NPM_DIR +
                          " SPARKCTL_RESTART_BACKOFF_MS=200 SPARKCTL_SUPERVISE_POLL_MS=500" +
                          " SPARKCTL_STAGE_PORT=" + std::to_string(free_port()) + " ";
  DownOnExit cleanup{env, dir};

  auto up =
      test::run_sparkctl("up " + lane + " --no-drop-caches --accept-new-host-key --ready-timeout 300", env);
  ASSERT_EQ(up.code, 0) << up.out;
  // Multi-node: the fabric gate gives the no-RDMA verdict (cpu: not refused) and staging pushes the head's
  // synthetic checkpoint to the worker.
  EXPECT_NE(up.out.find("fabric_doctor: n3: no RDMA NIC: TP across nodes would use Gloo/TCP"),
            std::string::npos)
      << up.out;
  EXPECT_NE(up.out.find("stage_weights: n3: complete"), std::string::npos) << up.out;
  auto key = read_file(dir + "/head/deploy/api_key");
  ASSERT_TRUE(key.ok());
  const std::string k = key->substr(0, key->find('\n'));
  auto ep = parse_endpoint("http://127.0.0.1:" + std::to_string(port) + "/v1");
  auto n = chat_completion(*ep, k, "demo", 8, 8, std::chrono::seconds(120));
  ASSERT_TRUE(n.ok()) << n.error().what();
  EXPECT_GE(*n, 1);

  json st = status_json(env);
  ASSERT_EQ(st["ranks"].size(), 2u) << st.dump(2);
  const int worker = st["ranks"][1]["pid"];
  ASSERT_EQ(::kill(worker, SIGKILL), 0);
  json after;
  ASSERT_TRUE(eventually(
      [&] {
        after = status_json(env);
        return after.value("phase", "") == "ready" && after["ranks"][1]["alive"].get<bool>() &&
               after["ranks"][1]["restarts"].get<int>() >= 1;
      },
      std::chrono::seconds(300)))
      << after.dump(2);
  EXPECT_TRUE(chat_completion(*ep, k, "demo", 8, 4, std::chrono::seconds(120)).ok());

  auto down = test::run_sparkctl("down", env);
  ASSERT_EQ(down.code, 0) << down.out;
  for (const auto& r : after["ranks"]) EXPECT_FALSE(pid_alive(r["pid"].get<int>()));
  for (size_t i = 0; i < cl.size(); ++i)
    EXPECT_TRUE(find_runtime_processes(cl.node(i).root).empty()) << "node " << i << " kept a runtime";
}

}  // namespace
}  // namespace spk
