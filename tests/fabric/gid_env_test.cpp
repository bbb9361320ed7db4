// Per-node GID choice and the NCCL/Gloo env built from it, on the fake Spark pair.
#include <gtest/gtest.h>

#include "fabric/fabric_env.h"
#include "fabric/gid_choice.h"
#include "tests/fabric/spark_pair.h"

namespace spk::fabric {
namespace {
using namespace testing;

TEST(FabricGid, ChoosesIndexPerNodeNeverShared) {
  auto a = spark_a(), b = spark_b();
  auto pa = choose_gids(a.discover_or_die(), {a.cidr, {}});
  auto pb = choose_gids(b.discover_or_die(), {b.cidr, {}});
  ASSERT_TRUE(pa.ok()) << pa.error().what();
  ASSERT_TRUE(pb.ok()) << pb.error().what();
  EXPECT_EQ(pa->hcas.front().gid_index, 3);
  EXPECT_EQ(pb->hcas.front().gid_index, 5) << "IPv6 entries first push the IPv4 RoCE v2 GID to 5";
  EXPECT_EQ(pb->hcas.front().gid, "::ffff:192.168.100.2");
  EXPECT_EQ(pa->netdev, "enp1s0f0np0");
}

TEST(FabricGid, BothHalvesOnAHealthyNode) {
  auto a = spark_a();
  auto p = choose_gids(a.discover_or_die(), {a.cidr, {}});
  ASSERT_TRUE(p.ok()) << p.error().what();
  ASSERT_EQ(p->hcas.size(), 2u);
  EXPECT_EQ(p->hca_list(), "rocep1s0f0,roceP2p1s0f0");
  EXPECT_EQ(p->hcas[1].ip, "192.168.100.3");
  EXPECT_EQ(p->hcas[1].gid_index, 3);
  EXPECT_TRUE(p->indices_agree);
  EXPECT_TRUE(p->skipped.empty());
}

TEST(FabricGid, DownHalfIsSkippedWithReasonAndFix) {
  auto b = spark_b();
  auto p = choose_gids(b.discover_or_die(), {b.cidr, {}});
  ASSERT_TRUE(p.ok()) << p.error().what();
  EXPECT_EQ(p->hca_list(), "rocep1s0f0");
  ASSERT_EQ(p->skipped.size(), 1u);
  EXPECT_EQ(p->skipped[0].device, "roceP2p1s0f0");
  EXPECT_NE(p->skipped[0].reason.find("1: DOWN"), std::string::npos) << p->skipped[0].reason;
  EXPECT_NE(p->skipped[0].fix.find("enP2p1s0f0np0"), std::string::npos) << p->skipped[0].fix;
}

TEST(FabricGid, NoRoceV2EntryNamesDeviceAndTable) {
  auto c = spark_c();
  auto p = choose_gids(c.discover_or_die(), {c.cidr, {}});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(
      p.error().message,
      "spark-c: rocep1s0f0 port 1 has no RoCE v2 GID for 192.168.100.5 (table: 0 fe80::a288:c2ff:fe01:1 "
      "IB/RoCE v1, 1 ::ffff:192.168.100.5 IB/RoCE v1)");
  EXPECT_NE(p.error().fix.find("sparkctl fabric setup"), std::string::npos);
}

TEST(FabricGid, WrongFabricIpIsAnError) {
  auto a = spark_a();
  auto p = choose_gids(a.discover_or_die(), {"192.168.100.9/24", {}});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("no RoCE v2 GID for 192.168.100.9"), std::string::npos)
      << p.error().message;
  EXPECT_NE(p.error().message.find("3 ::ffff:192.168.100.1 RoCE v2"), std::string::npos) << p.error().message;
}

TEST(FabricGid, NoDevicesAndUnknownExplicitHca) {
  FakeSysfs empty;
  StaticNetView net;
  auto nf = discover({"n1", empty.root()}, net);
  ASSERT_TRUE(nf.ok());
  auto p = choose_gids(*nf, {"192.168.100.1/24", {}});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("no RDMA device"), std::string::npos);
  auto a = spark_a();
  auto q = choose_gids(a.discover_or_die(), {a.cidr, {"mlx5_9"}});
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.error().message.find("'mlx5_9' not found (have: rocep1s0f0, roceP2p1s0f0)"), std::string::npos)
      << q.error().message;
}

TEST(FabricGid, ExplicitDownHalfIsAnError) {
  auto b = spark_b();
  auto p = choose_gids(b.discover_or_die(), {b.cidr, {"rocep1s0f0", "roceP2p1s0f0"}});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("roceP2p1s0f0"), std::string::npos);
}

TEST(FabricEnvTest, HealthyNodeGetsIndexBothHalvesAndIfnames) {
  auto a = spark_a();
  auto env = fabric_env(a.discover_or_die(), EnvRequest{{a.cidr, {}}, false, {}});
  ASSERT_TRUE(env.ok()) << env.error().what();
  auto v = env->values();
  EXPECT_EQ(v["NCCL_IB_HCA"], "rocep1s0f0,roceP2p1s0f0");
  EXPECT_EQ(v["NCCL_IB_GID_INDEX"], "3");
  EXPECT_EQ(v["NCCL_SOCKET_IFNAME"], "enp1s0f0np0");
  EXPECT_EQ(v["GLOO_SOCKET_IFNAME"], "enp1s0f0np0");
  EXPECT_EQ(v["SPARKCTL_HOST_IP"], "192.168.100.1");
  EXPECT_EQ(v["VLLM_HOST_IP"], "192.168.100.1");
  EXPECT_EQ(v.count("NCCL_IB_ADDR_RANGE"), 0u);
  EXPECT_NE(env->vars["NCCL_IB_GID_INDEX"].source.find("rocep1s0f0 port 1 index 3"), std::string::npos);
}

TEST(FabricEnvTest, SecondNodeGetsItsOwnIndex) {
  auto b = spark_b();
  auto env = fabric_env(b.discover_or_die(), EnvRequest{{b.cidr, {}}, false, {}});
  ASSERT_TRUE(env.ok()) << env.error().what();
  EXPECT_EQ(env->values()["NCCL_IB_GID_INDEX"], "5");
  EXPECT_EQ(env->values()["NCCL_IB_HCA"], "rocep1s0f0");
  EXPECT_NE(env->vars["NCCL_IB_HCA"].source.find("roceP2p1s0f0 left out"), std::string::npos);
}

TEST(FabricEnvTest, AddrRangeWhenAskedOrWhenHalvesDisagree) {
  auto a = spark_a();
  auto nf = a.discover_or_die();
  auto env = fabric_env(nf, EnvRequest{{a.cidr, {}}, true, {}});
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->values()["NCCL_IB_ADDR_RANGE"], "192.168.100.0/24");
  EXPECT_EQ(env->values()["NCCL_IB_ADDR_FAMILY"], "AF_INET");
  EXPECT_EQ(env->values().count("NCCL_IB_GID_INDEX"), 0u);

  // Second half with an IPv6 entry first: its index is 5 while the first half's is 3.
  FakeNode n{"spark-d", "192.168.100.1/24"};
  n.sysfs->add({"rocep1s0f0", "0000:01:00.0", "enp1s0f0np0", "4: ACTIVE", "200 Gb/sec (4X HDR)",
                roce_table("192.168.100.1")});
  n.sysfs->add({"roceP2p1s0f0", "0002:01:00.0", "enP2p1s0f0np0", "4: ACTIVE", "200 Gb/sec (4X HDR)",
                roce_table("192.168.100.3", true)});
  auto mixed = fabric_env(n.discover_or_die(), EnvRequest{{n.cidr, {}}, false, {}});
  ASSERT_TRUE(mixed.ok()) << mixed.error().what();
  EXPECT_FALSE(mixed->plan.indices_agree);
  EXPECT_EQ(mixed->values()["NCCL_IB_ADDR_RANGE"], "192.168.100.0/24");
  EXPECT_EQ(mixed->values().count("NCCL_IB_GID_INDEX"), 0u);
  EXPECT_NE(mixed->vars["NCCL_IB_ADDR_RANGE"].source.find("roceP2p1s0f0=5"), std::string::npos);
}

TEST(FabricEnvTest, OverridesApplyLastAndEmptyRemoves) {
  auto a = spark_a();
  EnvRequest req{{a.cidr, {}},
                 false,
                 {{"NCCL_DEBUG", "INFO"}, {"NCCL_IB_GID_INDEX", ""}, {"NCCL_SOCKET_IFNAME", "eth9"}}};
  auto env = fabric_env(a.discover_or_die(), req);
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->vars["NCCL_DEBUG"].value, "INFO");
  EXPECT_EQ(env->vars["NCCL_DEBUG"].source, "recipe override");
  EXPECT_EQ(env->vars["NCCL_SOCKET_IFNAME"].value, "eth9");
  EXPECT_EQ(env->vars.count("NCCL_IB_GID_INDEX"), 0u);
  nlohmann::json j = *env;
  EXPECT_EQ(j.get<FabricEnv>().values(), env->values());
  EXPECT_EQ(nlohmann::json(req).get<EnvRequest>().overrides, req.overrides);
}

TEST(FabricEnvTest, SharedIndexOverrideWarnsOnTheNodeItDoesNotFit) {
  auto a = spark_a(), b = spark_b();
  EnvRequest shared{{"", {}}, false, {{"NCCL_IB_GID_INDEX", "3"}}};
  shared.gid.fabric_cidr = a.cidr;
  auto ea = fabric_env(a.discover_or_die(), shared);
  shared.gid.fabric_cidr = b.cidr;
  auto eb = fabric_env(b.discover_or_die(), shared);
  ASSERT_TRUE(ea.ok() && eb.ok());
  EXPECT_TRUE(ea->warnings.empty());
  ASSERT_EQ(eb->warnings.size(), 1u);
  EXPECT_NE(eb->warnings[0].find("spark-b: recipe sets NCCL_IB_GID_INDEX=3 but rocep1s0f0's RoCE v2 GID for "
                                 "192.168.100.2 is at index 5"),
            std::string::npos)
      << eb->warnings[0];
}

TEST(FabricEnvTest, NoGidFailsTheEnv) {
  auto c = spark_c();
  auto env = fabric_env(c.discover_or_die(), EnvRequest{{c.cidr, {}}, false, {}});
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.error().message.find("spark-c: rocep1s0f0"), std::string::npos);
}

}  // namespace
}  // namespace spk::fabric
