// Cluster inventory: defaults merge, exactly one head, unique names and fabric IPs, CIDR, ports.
#include "orchestrator/inventory.h"

#include <gtest/gtest.h>

#include <string>

namespace spk {
namespace {

std::string dump(const ClusterLoad& l) {
  std::string out;
  for (const auto& d : l.diagnostics) out += d.str() + "\n";
  return out;
}

TEST(Inventory, LoadsNodesWithDefaultsAndHeadFirst) {
  auto l = load_cluster_file(std::string(PLAN_FIXTURES) + "/sparks.yaml");
  ASSERT_TRUE(l.cluster.has_value()) << dump(l);
  const Cluster& c = *l.cluster;
  EXPECT_EQ(c.name, "sparks");
  ASSERT_EQ(c.nodes.size(), 2u);
  EXPECT_EQ(c.head().name, "spark-a");  // listed second, ordered first
  EXPECT_EQ(c.nodes[0].ssh.port, 2222);
  EXPECT_EQ(c.nodes[1].ssh.port, 22);
  EXPECT_EQ(c.nodes[1].ssh.user, "spark");
  EXPECT_EQ(c.nodes[1].fabric.interface, "enp1s0f0np0");
  ASSERT_EQ(c.nodes[1].fabric.hca.size(), 2u);
  EXPECT_EQ(c.nodes[1].fabric.address(), "10.10.10.2");
  EXPECT_EQ(c.nodes[0].reach_address(), "10.10.10.1");
  EXPECT_EQ(c.nodes[0].state_dir, "/var/cache/sparkctl/state");
  EXPECT_EQ(ssh_target(c.nodes[0]).host, "192.168.1.10");
  EXPECT_TRUE(l.diagnostics.empty()) << dump(l);
}

TEST(Inventory, EveryErrorClassIsReportedWithItsPosition) {
  auto l = load_cluster_file(std::string(PLAN_FIXTURES) + "/bad_cluster.yaml");
  EXPECT_FALSE(l.cluster.has_value());
  std::string all = dump(l);
  EXPECT_NE(all.find("bad_cluster.yaml:7:27: nodes[0].ssh: unknown key 'prot' (did you mean 'port'?)"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find(":9:11: nodes[1].name: 'a' is already the name of the node at line 5"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("nodes[1].ssh.port: 0 is out of range [1,65535]"), std::string::npos) << all;
  EXPECT_NE(all.find("nodes[1].fabric.ip: '10.10.10.1/33' is not an IPv4 CIDR"), std::string::npos) << all;
  EXPECT_NE(all.find(":14:11: nodes[2].role: 'boss' is not head or worker"), std::string::npos) << all;
  EXPECT_NE(all.find("nodes[2].fabric.ip: 10.10.10.1 is already the fabric IP of the node at line 5"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("nodes: 2 nodes have role head"), std::string::npos) << all;
}

TEST(Inventory, MissingHeadHostAndCacheDir) {
  auto l = load_cluster("nodes:\n  - {name: a, role: worker}\n", "c.yaml");
  std::string all = dump(l);
  EXPECT_FALSE(l.cluster.has_value());
  EXPECT_NE(all.find("no node has role head"), std::string::npos) << all;
  EXPECT_NE(all.find("has no SSH host"), std::string::npos) << all;
  EXPECT_NE(all.find("has no cache dir"), std::string::npos) << all;
  l = load_cluster("nodes: []\n", "c.yaml");
  EXPECT_NE(dump(l).find("expected a non-empty list of nodes"), std::string::npos);
  l = load_cluster("nodes:\n  - {name: a, role: head, local: true, cache_dir: rel}\n", "c.yaml");
  EXPECT_NE(dump(l).find("'rel' is not an absolute path"), std::string::npos) << dump(l);
}

TEST(Inventory, SubnetMismatchIsAWarning) {
  auto l = load_cluster(
      "defaults: {cache_dir: /c}\nnodes:\n"
      "  - {name: a, role: head, ssh: {host: h1}, fabric: {ip: 10.0.0.1/24}}\n"
      "  - {name: b, ssh: {host: h2}, fabric: {ip: 10.0.1.1/24}}\n",
      "c.yaml");
  ASSERT_TRUE(l.cluster.has_value()) << dump(l);
  ASSERT_EQ(l.diagnostics.size(), 1u);
  EXPECT_EQ(l.diagnostics[0].severity, Severity::warning);
}

TEST(Inventory, ImplicitLocalCluster) {
  Cluster c = local_cluster("/st");
  ASSERT_EQ(c.nodes.size(), 1u);
  EXPECT_TRUE(c.is_local());
  EXPECT_EQ(c.head().name, "local");
  EXPECT_EQ(c.head().ssh.host, "127.0.0.1");
  EXPECT_EQ(c.head().gpus, 1);
  EXPECT_EQ(c.head().cache_dir, "/st/cache");
  EXPECT_EQ(c.source, "implicit");
  auto l = load_cluster_or_local("", "/st");
  ASSERT_TRUE(l.cluster.has_value());
  EXPECT_EQ(l.cluster->name, "local");
}

}  // namespace
}  // namespace spk
