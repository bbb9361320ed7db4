// Doctor's local checks against fake trees and a StaticNetView (no network touched: peers empty).
#include <gtest/gtest.h>

#include "fabric/doctor.h"
#include "tests/fabric/spark_pair.h"

namespace spk::fabric {
namespace {
using namespace testing;

DoctorRequest request(const FakeNode& n) {
  DoctorRequest r;
  r.node = n.name;
  r.sysfs_root = n.sysfs->root();
  r.fabric_cidr = n.cidr;
  r.skip = {"nccl"};
  r.nccl_ib_hca = "";
  return r;
}

const Finding* find(const DoctorResult& r, const std::string& check, bool ok) {
  for (auto& f : r.findings)
    if (f.check == check && f.ok == ok) return &f;
  return nullptr;
}

std::string dump(const DoctorResult& r) { return nlohmann::json(r).dump(1); }

TEST(FabricDoctorFake, HealthyNodePasses) {
  auto a = spark_a();
  auto req = request(a);
  req.nccl_ib_hca = "=rocep1s0f0:1,roceP2p1s0f0:1";
  auto r = run_doctor(req, a.net);
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_TRUE(r->ok) << dump(*r);
  ASSERT_TRUE(find(*r, "gid", true));
  EXPECT_NE(find(*r, "gid", true)->message.find("rocep1s0f0 port 1 index 3"), std::string::npos);
  EXPECT_TRUE(find(*r, "ip", true));
  EXPECT_TRUE(find(*r, "mtu", true));
  EXPECT_TRUE(find(*r, "rate", true));
  EXPECT_TRUE(find(*r, "nccl_ib_hca", true));
}

TEST(FabricDoctorFake, OneHalfInNcclIbHcaFails) {
  auto a = spark_a();
  auto req = request(a);
  req.nccl_ib_hca = "rocep1s0f0";
  auto r = run_doctor(req, a.net);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok);
  const Finding* f = find(*r, "nccl_ib_hca", false);
  ASSERT_TRUE(f) << dump(*r);
  EXPECT_NE(f->message.find("leaves out roceP2p1s0f0"), std::string::npos) << f->message;
  EXPECT_EQ(f->fix, "set NCCL_IB_HCA=rocep1s0f0,roceP2p1s0f0 (or leave it to sparkctl plan)");
}

TEST(FabricDoctorFake, DownHalfDriftAndLowMtuAreFindings) {
  auto b = spark_b();
  b.net.links["enp1s0f0np0"].mtu = 1500;  // a reboot reset it
  auto req = request(b);
  req.expected_gid_index = 3;  // the plan was made before the table moved
  auto r = run_doctor(req, b.net);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok);
  const Finding* halves = find(*r, "halves", false);
  ASSERT_TRUE(halves) << dump(*r);
  EXPECT_NE(halves->message.find("roceP2p1s0f0"), std::string::npos);
  const Finding* drift = find(*r, "gid", false);
  ASSERT_TRUE(drift) << dump(*r);
  EXPECT_NE(drift->message.find("GID index is 5, the plan says 3"), std::string::npos) << drift->message;
  const Finding* mtu = find(*r, "mtu", false);
  ASSERT_TRUE(mtu) << dump(*r);
  EXPECT_EQ(mtu->message, "enp1s0f0np0 MTU 1500, wants 9000");
  EXPECT_NE(mtu->fix.find("sparkctl fabric setup --iface enp1s0f0np0 --mtu 9000"), std::string::npos);
}

// An MTU above the asked one carries the asked frames: not a failure (issue 27).
TEST(FabricDoctorFake, MtuAboveTheAskedOneIsOk) {
  auto a = spark_a();
  a.net.links["enp1s0f0np0"].mtu = 9216;
  auto req = request(a);
  req.nccl_ib_hca = "=rocep1s0f0:1,roceP2p1s0f0:1";
  auto r = run_doctor(req, a.net);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->ok) << dump(*r);
  const Finding* mtu = find(*r, "mtu", true);
  ASSERT_TRUE(mtu) << dump(*r);
  EXPECT_EQ(mtu->message, "enp1s0f0np0 MTU 9216 (>= 9000 asked)");
  EXPECT_TRUE(r->verdict.empty());
}

TEST(FabricDoctorFake, MissingIpAndNoGidAreFindingsWithFixes) {
  auto c = spark_c();
  c.net.addrs.clear();
  auto req = request(c);
  req.iface = "enp1s0f0np0";
  req.min_rate_gbps = 400;
  auto r = run_doctor(req, c.net);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->ok);
  const Finding* gid = find(*r, "gid", false);
  ASSERT_TRUE(gid) << dump(*r);
  EXPECT_NE(gid->message.find("has no RoCE v2 GID for 192.168.100.5"), std::string::npos);
  const Finding* ip = find(*r, "ip", false);
  ASSERT_TRUE(ip) << dump(*r);
  EXPECT_EQ(ip->message, "enp1s0f0np0 has no IPv4 address, wants 192.168.100.5/24");
  EXPECT_NE(ip->fix.find("--ip 192.168.100.5/24"), std::string::npos);
}

TEST(FabricDoctorFake, LowRateAndBadRequests) {
  auto a = spark_a();
  auto req = request(a);
  req.min_rate_gbps = 400;
  auto r = run_doctor(req, a.net);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(find(*r, "rate", false)) << dump(*r);
  req.skip = {"nonsense"};
  EXPECT_FALSE(run_doctor(req, a.net).ok());
  req.skip = {};
  req.peers = {"not-an-ip"};
  EXPECT_FALSE(run_doctor(req, a.net).ok());
}

// A node without any RDMA device: one verdict, no rdma findings to fail (issue 27).
TEST(FabricDoctorFake, NoRdmaNicIsAVerdictNotAFailure) {
  FakeSysfs empty;
  StaticNetView net;
  DoctorRequest req;
  req.node = "vm";
  req.sysfs_root = empty.root();
  req.skip = {"nccl"};
  auto r = run_doctor(req, net);
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_TRUE(r->ok) << dump(*r);
  EXPECT_EQ(r->verdict, "no RDMA NIC: TP across nodes would use Gloo/TCP");
  EXPECT_TRUE(r->findings.empty()) << dump(*r);
}

}  // namespace
}  // namespace spk::fabric
