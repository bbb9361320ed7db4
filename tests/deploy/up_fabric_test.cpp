// `up` of a two-node cpu lane with the fabric gate, staging and each node's own fabric env, end to end with
// real processes. The test process moves into a network namespace of its own (unshare(CLONE_NEWNET): it
// and everything it starts vanish with it) holding lo and one veth pair, veth-a 10.233.0.1/24 (node n2's
// fabric port, MTU left at 1500) and veth-b 10.233.0.2/24 (n3's, MTU 9000). Two sshd nodes on 127.0.0.2/3
// run there; each sees its own fake sysfs tree through SPARKCTL_SYSFS_ROOT (sshd SetEnv): n2's RoCE v2 GID
// for its IP at index 3, n3's at index 5 (global IPv6 entries first), both CX7 halves on each. Runtime
// stand-in (tests/support/fake_serve.cpp), synthetic checkpoint staged by up. Checks:
//  - n2 at MTU 1500: up is refused naming n2, the mtu check and the fix; no rank was started;
//  - up --fabric-setup: n2's MTU change is printed, n3 is unchanged, the gate passes, staging pushes the
//    head's checkpoint to n3, and each rank's real process env carries its own node's GID index, HCAs and
//    interfaces; `plan --json --fabric-setup --fabric-env` equals what up launched;
//  - after down, up again: setup is not run, staging moves nothing.
#include <gtest/gtest.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "tests/deploy/deploy_test_support.h"
#include "tests/fabric/fake_sysfs.h"
#include "tests/support/sshd_harness.h"

namespace spk {
namespace {

using namespace deploy_test;
using nlohmann::json;
namespace fs = std::filesystem;
namespace ft = spk::fabric::testing;

std::string ip_binary() { return fs::exists("/usr/sbin/ip") ? "/usr/sbin/ip" : "/sbin/ip"; }

// A private network namespace for this process: lo up, veth-a/veth-b with the fabric addresses.
std::string enter_private_netns() {
  if (::unshare(CLONE_NEWNET) != 0) return std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
  const std::string ip = ip_binary();
  for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
           {ip, "link", "set", "lo", "up"},
           {ip, "link", "add", "veth-a", "type", "veth", "peer", "name", "veth-b"},
           {ip, "addr", "add", "10.233.0.1/24", "dev", "veth-a"},
           {ip, "addr", "add", "10.233.0.2/24", "dev", "veth-b"},
           {ip, "link", "set", "veth-b", "mtu", "9000"},
           {ip, "link", "set", "veth-a", "up"},
           {ip, "link", "set", "veth-b", "up"}}) {
    std::string out;
    if (testing::run_argv(argv, &out) != 0) return argv[1] + " " + argv[2] + " failed: " + out;
  }
  return {};
}

// One node's fake CX7 port: both halves, the first on `netdev` with `ip`, the second with `ip2`.
void add_cx7(ft::FakeSysfs& s, const std::string& netdev, const std::string& ip, const std::string& ip2,
             bool ipv6_first) {
  s.add({"rocep1s0f0", "0000:01:00.0", netdev, "4: ACTIVE", "200 Gb/sec (4X HDR)",
         ft::roce_table(ip, ipv6_first)});
  s.add({"roceP2p1s0f0", "0002:01:00.0", netdev + "2", "4: ACTIVE", "200 Gb/sec (4X HDR)",
         ft::roce_table(ip2, ipv6_first)});
}

std::map<std::string, std::string> proc_env(int pid) {
  std::map<std::string, std::string> out;
  auto text = read_file("/proc/" + std::to_string(pid) + "/environ");
  if (!text) return out;
  size_t at = 0;
  while (at < text->size()) {
    size_t end = text->find('\0', at);
    if (end == std::string::npos) end = text->size();
    std::string kv = text->substr(at, end - at);
    if (auto eq = kv.find('='); eq != std::string::npos) out[kv.substr(0, eq)] = kv.substr(eq + 1);
    at = end + 1;
  }
  return out;
}

bool has(const std::string& out, const std::string& what) { return out.find(what) != std::string::npos; }

TEST(UpFabric, GateRefusesMtu1500ThenSetupPassesStagesAndGivesEachRankItsOwnNodesEnv) {
  if (::geteuid() != 0) GTEST_SKIP() << "network namespaces and sshd need root";
  if (std::string why = enter_private_netns(); !why.empty())
    GTEST_SKIP() << "no private network namespace here: " << why;
  ft::FakeSysfs sys_a, sys_b;
  add_cx7(sys_a, "veth-a", "10.233.0.1", "10.233.0.3", /*ipv6_first=*/false);  // RoCE v2 at index 3
  add_cx7(sys_b, "veth-b", "10.233.0.2", "10.233.0.4", /*ipv6_first=*/true);   // RoCE v2 at index 5
  auto c = testing::SshdCluster::start({"127.0.0.2", "127.0.0.3"}, {{"SPARKCTL_SYSFS_ROOT=" + sys_a.root()},
                                                                    {"SPARKCTL_SYSFS_ROOT=" + sys_b.root()}});
  if (!c.ok()) GTEST_SKIP() << "sshd cannot run here: " << c.error().what();
  auto& cl = **c;
  const std::string dir = cl.dir();
  ASSERT_TRUE(write_sshd_inventory(cl, "fab2",
                                   {", fabric: {ip: 10.233.0.1/24, interface: veth-a}",
                                    ", fabric: {ip: 10.233.0.2/24, interface: veth-b}"}));
  const int port = free_port();
  const std::string lane = dir + "/lane-fab.yaml";
  ASSERT_TRUE(write_file_atomic(lane,
                                "name: lane-fab\nbackend: cpu\n"
                                "model:\n  synthetic: {arch: qwen3, preset: tiny, tokenizer: qwen3, "
                                "seed: 1}\n  served_name: fake\n"
                                "tensor_parallel: 2\nnodes: 2\ndevice_memory_gib: 4\nmax_model_len: 2048\n"
                                "max_num_seqs: 4\nmax_num_batched_tokens: 2048\nport: " +
                                    std::to_string(port) + "\nmaster_port: " + std::to_string(free_port()) +
                                    "\nwarmup:\n  - {prompt_tokens: 8, max_tokens: 2}\n")
                  .ok());
  fs::create_directories(dir + "/shm");
  const std::string env = "SPARKCTL_STATE_DIR=" + dir + "/head SPARKCTL_CLUSTER=" + dir +
                          "/cluster.yaml SPARKCTL_RUNTIME_STANDIN=" + SPK_FAKE_SERVE +
                          " SPARKCTL_SHM_DIR=" + dir + "/shm SPARKCTL_NPM_DIR=" + SPARKCTL_NPM_DIR +
                          " SPARKCTL_STAGE_PORT=" + std::to_string(free_port()) + " ";
  DownOnExit cleanup{env, dir};
  const std::string flags = " --no-drop-caches --no-supervise --accept-new-host-key";

  // 1. n2's fabric link is at MTU 1500: refused before any rank starts, naming n2, the check and the fix.
  auto refused = test::run_sparkctl("up " + lane + flags, env);
  std::cout << refused.out;
  EXPECT_EQ(refused.code, 1) << refused.out;
  EXPECT_TRUE(has(refused.out, "fabric gate refused lane-fab before any rank started")) << refused.out;
  EXPECT_TRUE(has(refused.out, "n2 mtu: veth-a MTU 1500, wants 9000")) << refused.out;
  EXPECT_TRUE(has(refused.out, "sparkctl fabric setup --iface veth-a --mtu 9000")) << refused.out;
  EXPECT_TRUE(has(refused.out, "--fabric-setup")) << refused.out;
  EXPECT_FALSE(has(refused.out, "n3 mtu:")) << "n3 is at 9000: " << refused.out;
  EXPECT_TRUE(has(refused.out, "n3 [ok] gid: n3: RoCE v2 GID rocep1s0f0 port 1 index 5")) << refused.out;
  EXPECT_FALSE(has(refused.out, "s] launch_")) << "nothing may start on refusal: " << refused.out;
  for (size_t i = 0; i < cl.size(); ++i)
    for (const auto& e : fs::recursive_directory_iterator(cl.node(i).root))
      EXPECT_NE(e.path().extension(), ".pid") << e.path();
  EXPECT_EQ(status_json(env).value("phase", ""), "failed");

  // 2. --fabric-setup: n2's MTU is set (and printed), n3 unchanged; gate passes; staging pushes to n3.
  auto up = test::run_sparkctl("up " + lane + flags + " --fabric-setup", env);
  std::cout << up.out;
  ASSERT_EQ(up.code, 0) << up.out;
  EXPECT_TRUE(has(up.out, "fabric_setup: n2: changed veth-a: mtu 1500 -> 9000")) << up.out;
  EXPECT_TRUE(has(up.out, "fabric_setup: n3: no change")) << up.out;
  EXPECT_TRUE(has(up.out, "fabric_doctor: ok on 2 node(s)")) << up.out;
  EXPECT_TRUE(has(up.out, "stage_weights: n3: complete")) << up.out;
  EXPECT_FALSE(has(up.out, "moved nothing")) << "a cold worker receives the checkpoint: " << up.out;
  EXPECT_LT(up.out.find("fabric_doctor:"), up.out.find("stage_weights:"));
  EXPECT_LT(up.out.find("fabric_env:"), up.out.find("s] launch_worker:"));
  json st = status_json(env);
  ASSERT_EQ(st.value("phase", ""), "ready") << st.dump(2);
  ASSERT_EQ(st["ranks"].size(), 2u);
  // The real rank processes: each carries its own node's GID index, both halves and its interface.
  const std::map<std::string, std::string> want[2] = {{{"NCCL_IB_GID_INDEX", "3"},
                                                       {"NCCL_IB_HCA", "rocep1s0f0,roceP2p1s0f0"},
                                                       {"NCCL_SOCKET_IFNAME", "veth-a"},
                                                       {"GLOO_SOCKET_IFNAME", "veth-a"},
                                                       {"SPARKCTL_HOST_IP", "10.233.0.1"}},
                                                      {{"NCCL_IB_GID_INDEX", "5"},
                                                       {"NCCL_IB_HCA", "rocep1s0f0,roceP2p1s0f0"},
                                                       {"NCCL_SOCKET_IFNAME", "veth-b"},
                                                       {"GLOO_SOCKET_IFNAME", "veth-b"},
                                                       {"SPARKCTL_HOST_IP", "10.233.0.2"}}};
  for (int r = 0; r < 2; ++r) {
    auto penv = proc_env(st["ranks"][r]["pid"].get<int>());
    for (const auto& [k, v] : want[r]) EXPECT_EQ(penv[k], v) << "rank " << r << " " << k;
  }
  // plan with the same flags, reading every node's fabric env, prints exactly what up launched.
  auto plan = test::run_sparkctl("--json plan " + lane + " --fabric-setup --fabric-env", env, false);
  ASSERT_EQ(plan.code, 0) << plan.out;
  json pj = json::parse(plan.out, nullptr, false);
  ASSERT_TRUE(pj.is_object()) << plan.out;
  auto spec_text = read_file(dir + "/head/deploy/spec.json");
  ASSERT_TRUE(spec_text.ok());
  json spec = json::parse(*spec_text);
  ASSERT_EQ(pj["ranks"].size(), spec["ranks"].size());
  for (size_t i = 0; i < spec["ranks"].size(); ++i) {
    auto pa = pj["ranks"][i]["argv"].get<std::vector<std::string>>();
    auto sa = spec["ranks"][i]["argv"].get<std::vector<std::string>>();
    EXPECT_EQ(std::vector<std::string>(pa.begin() + 3, pa.end()),
              std::vector<std::string>(sa.begin() + 1, sa.end()));
    std::vector<std::pair<std::string, std::string>> pe, se;
    for (const auto& e : pj["ranks"][i]["env"]) pe.emplace_back(e["name"], e["value"]);
    for (const auto& e : spec["ranks"][i]["env"]) se.emplace_back(e[0], e[1]);
    EXPECT_EQ(pe, se) << "rank " << i << ": plan --fabric-env differs from what up launched";
  }
  for (const auto& step : pj["steps"]) {
    const std::string kind = step["kind"];
    if (kind.rfind("fabric", 0) == 0 || kind == "stage_weights" || kind == "synth_model") {
      EXPECT_FALSE(step["skipped"].get<bool>()) << kind;
      EXPECT_TRUE(has(up.out, "s] " + kind + ":")) << "plan lists " << kind << ", up never ran it";
    }
  }
  auto down = test::run_sparkctl("down", env);
  ASSERT_EQ(down.code, 0) << down.out;

  // 3. Again: no setup asked (and none needed), the gate passes, staging moves nothing.
  auto again = test::run_sparkctl("up " + lane + flags, env);
  std::cout << again.out;
  ASSERT_EQ(again.code, 0) << again.out;
  EXPECT_FALSE(has(again.out, "fabric_setup:")) << again.out;
  EXPECT_TRUE(has(again.out, "n2 [ok] mtu: veth-a MTU 9000")) << again.out;
  EXPECT_TRUE(has(again.out, "stage_weights: n3: complete")) << again.out;
  EXPECT_TRUE(has(again.out, "moved nothing")) << again.out;
  EXPECT_TRUE(has(again.out, "synth_model: n2:") && has(again.out, "exists and is complete")) << again.out;
}

}  // namespace
}  // namespace spk
