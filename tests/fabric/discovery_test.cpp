// Discovery from fake sysfs trees shaped like a DGX Spark, plus the small pure helpers.
#include <gtest/gtest.h>

#include "fabric/ipv4.h"
#include "fabric/nccl_probe.h"
#include "tests/fabric/spark_pair.h"

namespace spk::fabric {
namespace {
using namespace testing;

TEST(FabricIpv4, ParsesCidrAndMapsGid) {
  auto c = parse_cidr("192.168.100.2/24");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ip(), "192.168.100.2");
  EXPECT_EQ(c->network(), "192.168.100.0/24");
  EXPECT_EQ(ipv4_mapped_gid(c->addr), "0000:0000:0000:0000:0000:ffff:c0a8:6402");
  uint32_t back = 0;
  EXPECT_TRUE(gid_ipv4("0000:0000:0000:0000:0000:ffff:c0a8:6402", &back));
  EXPECT_EQ(back, c->addr);
  EXPECT_FALSE(gid_ipv4(kLinkLocal, nullptr));
  EXPECT_EQ(gid_short(kLinkLocal), "fe80::a288:c2ff:fe01:1");
  EXPECT_EQ(gid_short(v4("10.1.2.3")), "::ffff:10.1.2.3");
}

TEST(FabricIpv4, RejectsBadInputWithFix) {
  auto a = parse_cidr("192.168.100.2");
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.error().message.find("192.168.100.2"), std::string::npos);
  EXPECT_NE(a.error().fix.find("/24"), std::string::npos);
  EXPECT_FALSE(parse_cidr("192.168.100.300/24").ok());
  EXPECT_FALSE(parse_cidr("192.168.100.3/33").ok());
  EXPECT_TRUE(parse_cidr("10.0.0.1", 32).ok());
}

TEST(FabricIpv4, HalfKeysAndRates) {
  EXPECT_EQ(half_key_from_name("rocep1s0f0"), "p1s0f0");
  EXPECT_EQ(half_key_from_name("roceP2p1s0f0"), "p1s0f0");
  EXPECT_NE(half_key_from_name("rocep1s0f1"), half_key_from_name("roceP2p1s0f0"));
  EXPECT_DOUBLE_EQ(parse_rate_gbps("200 Gb/sec (4X HDR)"), 200);
  EXPECT_DOUBLE_EQ(parse_rate_gbps("garbage"), 0);
  EXPECT_EQ(nccl_version_string(22304), "2.23.4");
  EXPECT_EQ(nccl_version_string(2708), "2.7.8");
}

TEST(FabricDiscovery, ReadsBothHalvesOfTheSparkPort) {
  auto node = spark_a();
  NodeFabric nf = node.discover_or_die();
  EXPECT_EQ(nf.node, "spark-a");
  ASSERT_EQ(nf.devices.size(), 2u);
  const RdmaDevice* d0 = nf.device("rocep1s0f0");
  const RdmaDevice* d1 = nf.device("roceP2p1s0f0");
  ASSERT_TRUE(d0 && d1);
  EXPECT_EQ(d0->pci, "0000:01:00.0");
  EXPECT_EQ(d1->pci, "0002:01:00.0");
  EXPECT_EQ(d0->half_key, d1->half_key) << "both halves of one CX7 port share a key";
  ASSERT_EQ(d0->netdevs, std::vector<std::string>{"enp1s0f0np0"});
  ASSERT_EQ(d0->ports.size(), 1u);
  const RdmaPort& p = d0->ports[0];
  EXPECT_TRUE(p.active());
  EXPECT_EQ(p.link_layer, "Ethernet");
  EXPECT_DOUBLE_EQ(p.rate_gbps, 200);
  ASSERT_EQ(p.gids.size(), 4u) << "12 all-zero entries of the 16-entry table are skipped";
  EXPECT_EQ(p.gids[3].index, 3);
  EXPECT_EQ(p.gids[3].type, "RoCE v2");
  EXPECT_EQ(p.gids[3].ndev, "enp1s0f0np0");
  const Netdev* n = nf.netdev("enP2p1s0f0np0");
  ASSERT_TRUE(n);
  EXPECT_EQ(n->mtu, 9000);
  EXPECT_EQ(n->operstate, "up");
  EXPECT_EQ(n->speed_mbps, 100000);
  EXPECT_EQ(n->addrs, std::vector<std::string>{"192.168.100.3/24"});
  EXPECT_EQ(nf.netdev("eth0"), nullptr) << "only RDMA netdevs are listed";
}

TEST(FabricDiscovery, DownHalfHasNoSpeedAndJsonRoundTrips) {
  auto node = spark_b();
  NodeFabric nf = node.discover_or_die();
  const RdmaDevice* d1 = nf.device("roceP2p1s0f0");
  ASSERT_TRUE(d1);
  EXPECT_FALSE(d1->ports.at(0).active());
  EXPECT_EQ(nf.netdev("enP2p1s0f0np0")->speed_mbps, -1);
  nlohmann::json j = nf;
  NodeFabric back = j.get<NodeFabric>();
  EXPECT_EQ(nlohmann::json(back), j);
  EXPECT_EQ(back.device("rocep1s0f0")->ports.at(0).gids.at(5).type, "RoCE v2");
}

TEST(FabricDiscovery, MissingRootIsAnErrorEmptyTreeIsNot) {
  StaticNetView net;
  auto bad = discover({"n", "/nonexistent/sys"}, net);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what().find("--sysfs-root"), std::string::npos);
  FakeSysfs empty;
  auto ok = discover({"n", empty.root()}, net);
  ASSERT_TRUE(ok.ok()) << ok.error().what();
  EXPECT_TRUE(ok->devices.empty());
}

TEST(FabricNccl, ProbeNamesTheFixWhenAbsent) {
  auto r = probe_nccl("libnccl-does-not-exist.so.2");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("NCCL not found"), std::string::npos);
  EXPECT_EQ(r.error().fix, "install NCCL or set LD_LIBRARY_PATH");
  auto real = probe_nccl();  // either outcome is legitimate here; a success must carry a version
  if (real.ok()) EXPECT_GE(real->code, 2000) << real->version;
}

}  // namespace
}  // namespace spk::fabric
