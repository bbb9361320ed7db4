// The `sparkctl fabric` verbs through the real binary: show/env on fake trees (--sysfs-root, --addrs),
// setup/doctor/bw-serve inside network namespaces via `ip netns exec` (skips without permission).
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "tests/fabric/netns.h"
#include "tests/fabric/spark_pair.h"

namespace spk::fabric {
namespace {
using namespace testing;

ProcResult sparkctl(std::vector<std::string> args) {
  args.insert(args.begin(), SPARKCTL_BINARY);
  return run_argv(args);
}

std::string write_addrs(const FakeNode& n) {
  const std::string path = n.sysfs->root() + "/addrs.json";
  nlohmann::json j;
  j["addresses"] = n.net.addrs;
  std::ofstream(path) << j.dump();
  return path;
}

TEST(FabricCli, ShowPrintsTableAndChosenEnv) {
  auto b = spark_b();
  auto r = sparkctl({"fabric", "show", "--node", "spark-b", "--sysfs-root", b.sysfs->root(), "--addrs",
                     write_addrs(b), "--ip", b.cidr});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("rocep1s0f0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gid 5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NCCL_IB_GID_INDEX=5"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("roceP2p1s0f0 left out"), std::string::npos) << r.out;
}

TEST(FabricCli, EnvJsonAndNoGidExitsOne) {
  auto a = spark_a();
  auto r = sparkctl({"--json", "fabric", "env", "--sysfs-root", a.sysfs->root(), "--addrs", write_addrs(a),
                     "--ip", a.cidr, "--set", "NCCL_DEBUG=INFO"});
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["vars"]["NCCL_IB_HCA"]["value"], "rocep1s0f0,roceP2p1s0f0");
  EXPECT_EQ(j["vars"]["NCCL_IB_GID_INDEX"]["value"], "3");
  EXPECT_EQ(j["vars"]["NCCL_DEBUG"]["source"], "recipe override");
  auto c = spark_c();
  auto bad = sparkctl({"fabric", "env", "--node", "spark-c", "--sysfs-root", c.sysfs->root(), "--addrs",
                       write_addrs(c), "--ip", c.cidr});
  EXPECT_EQ(bad.code, 1) << bad.out;
  EXPECT_NE(bad.out.find("spark-c: rocep1s0f0 port 1 has no RoCE v2 GID for 192.168.100.5"),
            std::string::npos)
      << bad.out;
}

// Issue 27: without RoCE, show and doctor answer in one line; the inventory gives the fabric IP.
TEST(FabricCli, NoRdmaNicIsOneLineAndTheInventoryGivesTheFabricIp) {
  FakeSysfs empty;
  auto show = sparkctl({"fabric", "show", "--node", "vm", "--sysfs-root", empty.root()});
  EXPECT_EQ(show.code, 0) << show.out;
  EXPECT_EQ(show.out, "vm: no RDMA NIC: TP across nodes would use Gloo/TCP\n");
  auto doc = sparkctl({"fabric", "doctor", "--node", "vm", "--sysfs-root", empty.root(), "--skip", "nccl"});
  EXPECT_EQ(doc.code, 0) << doc.out;
  EXPECT_EQ(doc.out, "no RDMA NIC: TP across nodes would use Gloo/TCP\n");

  auto a = spark_a();
  const std::string inv = a.sysfs->root() + "/cluster.yaml";
  std::ofstream(inv)
      << "name: pair\ndefaults: {cache_dir: /var/cache/sparkctl}\nnodes:\n"
         "  - {name: spark-a, role: head, ssh: {host: 10.0.0.1}, fabric: {interface: enp1s0f0np0, ip: "
      << a.cidr
      << "}}\n"
         "  - {name: spark-b, role: worker, ssh: {host: 10.0.0.2}}\n";
  auto r = sparkctl({"--cluster", inv, "fabric", "doctor", "--node", "spark-a", "--sysfs-root",
                     a.sysfs->root(), "--addrs", write_addrs(a), "--skip", "nccl", "--skip", "mtu",
                     "--nccl-ib-hca", "rocep1s0f0,roceP2p1s0f0"});
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("fabric IP " + a.cidr + ", interface enp1s0f0np0 from " + inv), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("index 3"), std::string::npos) << r.out;
  auto nope =
      sparkctl({"--cluster", inv, "fabric", "doctor", "--node", "spark-z", "--sysfs-root", a.sysfs->root()});
  EXPECT_EQ(nope.code, 1) << nope.out;
  EXPECT_NE(nope.out.find("node 'spark-z' is not in"), std::string::npos) << nope.out;
}

TEST(FabricCli, SetupDoctorAndBwServeInNetns) {
  NetnsPair pair;
  if (!pair.error.empty()) GTEST_SKIP() << pair.error;
  auto in = [&](const std::string& ns, std::vector<std::string> args) {
    args.insert(args.begin(), {"ip", "netns", "exec", ns, SPARKCTL_BINARY});
    return run_argv(args);
  };
  auto s1 = in(pair.a, {"fabric", "setup", "--iface", "veth-a", "--ip", "10.231.0.1/30", "--mtu", "9000"});
  EXPECT_EQ(s1.code, 0) << s1.out;
  EXPECT_NE(s1.out.find("changed: veth-a: mtu 1500 -> 9000"), std::string::npos) << s1.out;
  auto s2 = in(pair.a, {"fabric", "setup", "--iface", "veth-a", "--ip", "10.231.0.1/30", "--mtu", "9000"});
  EXPECT_EQ(s2.code, 0) << s2.out;
  EXPECT_NE(s2.out.find("no change"), std::string::npos) << s2.out;
  auto s3 = in(pair.b, {"fabric", "setup", "--iface", "veth-b", "--ip", "10.231.0.2/30"});
  ASSERT_EQ(s3.code, 0) << s3.out;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // veth carrier

  ProcResult served;
  std::thread srv([&] {
    served =
        in(pair.b, {"fabric", "bw-serve", "--bind", "10.231.0.2", "--bw-port", "29611", "--timeout", "20"});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // let it listen
  auto doc =
      in(pair.a, {"fabric", "doctor", "--iface", "veth-a", "--ip", "10.231.0.1/30", "--peer", "10.231.0.2",
                  "--bw-port", "29611", "--bw-seconds", "0.5", "--skip", "rdma", "--skip", "nccl"});
  srv.join();
  EXPECT_EQ(doc.code, 0) << doc.out;
  EXPECT_NE(doc.out.find("DF ping of 9000 bytes (payload 8972) to 10.231.0.2: reply"), std::string::npos)
      << doc.out;
  EXPECT_NE(doc.out.find("Gbit/s"), std::string::npos) << doc.out;
  EXPECT_EQ(served.code, 0) << served.out;

  auto low = in(pair.b, {"fabric", "setup", "--iface", "veth-b", "--mtu", "1500"});
  ASSERT_EQ(low.code, 0) << low.out;
  auto doc2 = in(pair.a, {"fabric", "doctor", "--iface", "veth-a", "--ip", "10.231.0.1/30", "--peer",
                          "10.231.0.2", "--skip", "rdma", "--skip", "nccl", "--skip", "bw"});
  EXPECT_EQ(doc2.code, 1) << doc2.out;
  EXPECT_NE(doc2.out.find("FAIL"), std::string::npos) << doc2.out;
  EXPECT_NE(doc2.out.find("fix: set MTU 9000 on both nodes"), std::string::npos) << doc2.out;
}

}  // namespace
}  // namespace spk::fabric
