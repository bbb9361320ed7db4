// Real kernel, real sockets: fabric setup (rtnetlink), the doctor's DF ping and the TCP bandwidth test
// between two network namespaces joined by a veth pair. Needs root (CAP_NET_ADMIN); skips otherwise.
#include "tests/fabric/netns.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "fabric/df_ping.h"
#include "fabric/doctor.h"
#include "fabric/link_setup.h"
#include "fabric/tcp_bandwidth.h"

namespace spk::fabric {
namespace {
using namespace testing;

constexpr const char* kIpA = "10.231.0.1";
constexpr const char* kIpB = "10.231.0.2";

class FabricNetns : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!pair_.error.empty()) GTEST_SKIP() << pair_.error;
  }
  Result<SetupResult> setup(const std::string& ns, const std::string& iface, const std::string& cidr,
                            int mtu) {
    return in_netns(ns, [&] { return setup_links({ns, {{iface, cidr, mtu}}, false}); });
  }
  void setup_both(int mtu_a, int mtu_b) {
    auto ra = setup(pair_.a, "veth-a", std::string(kIpA) + "/30", mtu_a);
    ASSERT_TRUE(ra.ok()) << ra.error().what();
    auto rb = setup(pair_.b, "veth-b", std::string(kIpB) + "/30", mtu_b);
    ASSERT_TRUE(rb.ok()) << rb.error().what();
    wait_oper_up(pair_.a, "veth-a");
    wait_oper_up(pair_.b, "veth-b");
  }
  void wait_oper_up(const std::string& ns, const std::string& iface) {
    for (int i = 0; i < 50; ++i) {
      auto li = in_netns(ns, [&] { return kernel_net_view()->link(iface); });
      if (li.ok() && li->operstate == "up") return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL() << iface << " in " << ns << " never reached operstate up";
  }
  DoctorRequest doctor_req(const std::string& iface, const std::string& cidr, const std::string& peer) {
    DoctorRequest r;
    r.node = "netns";
    r.iface = iface;
    r.fabric_cidr = cidr;
    r.mtu = 9000;
    r.peers = {peer};
    r.skip = {"rdma", "nccl", "bw"};
    return r;
  }
  NetnsPair pair_;
};

TEST_F(FabricNetns, SetupAssignsIpMtuUpAndIsIdempotent) {
  auto first = setup(pair_.a, "veth-a", std::string(kIpA) + "/30", 9000);
  ASSERT_TRUE(first.ok()) << first.error().what();
  ASSERT_EQ(first->changes.size(), 3u) << nlohmann::json(*first).dump();
  EXPECT_EQ(describe(first->changes[0]), "veth-a: added address 10.231.0.1/30");
  EXPECT_EQ(describe(first->changes[1]), "veth-a: mtu 1500 -> 9000");
  EXPECT_EQ(describe(first->changes[2]), "veth-a: link down -> up");

  auto li = in_netns(pair_.a, [] { return kernel_net_view()->link("veth-a"); });
  ASSERT_TRUE(li.ok()) << li.error().what();
  EXPECT_EQ(li->mtu, 9000);
  EXPECT_TRUE(li->admin_up);
  auto addrs = in_netns(pair_.a, [] { return kernel_net_view()->addresses_of("veth-a"); });
  ASSERT_TRUE(addrs.ok());
  EXPECT_EQ(*addrs, std::vector<std::string>{"10.231.0.1/30"});

  auto second = setup(pair_.a, "veth-a", std::string(kIpA) + "/30", 9000);
  ASSERT_TRUE(second.ok()) << second.error().what();
  EXPECT_TRUE(second->changes.empty()) << nlohmann::json(*second).dump();
}

TEST_F(FabricNetns, SetupRefusesConflictsAndUnknownIfaces) {
  ASSERT_TRUE(setup(pair_.a, "veth-a", std::string(kIpA) + "/30", 9000).ok());
  auto other_prefix = setup(pair_.a, "veth-a", std::string(kIpA) + "/24", 9000);
  ASSERT_FALSE(other_prefix.ok());
  EXPECT_NE(other_prefix.error().message.find("has 10.231.0.1/30, the inventory says 10.231.0.1/24"),
            std::string::npos)
      << other_prefix.error().what();
  auto missing = setup(pair_.a, "enp9s0", std::string(kIpA) + "/30", 9000);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("no network interface 'enp9s0' (have: lo, veth-a)"),
            std::string::npos)
      << missing.error().what();
  auto dry = in_netns(pair_.b, [] { return setup_links({"b", {{"veth-b", "10.231.0.2/30", 9000}}, true}); });
  ASSERT_TRUE(dry.ok());
  EXPECT_EQ(dry->changes.size(), 3u);
  auto li = in_netns(pair_.b, [] { return kernel_net_view()->link("veth-b"); });
  EXPECT_EQ(li->mtu, 1500) << "dry run changed nothing";
}

TEST_F(FabricNetns, SetupHandlesBothHalvesInOneRequest) {
  // A second veth pair stands in for the second CX7 half (enP2p1s0f0np0 on a Spark).
  auto mk = run_argv({"ip", "-n", pair_.a, "link", "add", "veth-a2", "type", "veth", "peer", "name",
                      "veth-b2", "netns", pair_.b});
  ASSERT_EQ(mk.code, 0) << mk.out;
  SetupRequest req{"a", {{"veth-a", "10.231.0.1/30", 9000}, {"veth-a2", "10.231.0.5/30", 9000}}, false};
  auto r = in_netns(pair_.a, [&] { return setup_links(req); });
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->changes.size(), 6u) << nlohmann::json(*r).dump();
  auto again = in_netns(pair_.a, [&] { return setup_links(req); });
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->changes.empty()) << nlohmann::json(*again).dump();
  // The same IP on the other half is refused, never moved silently.
  SetupRequest dup{"a", {{"veth-a2", "10.231.0.1/30", 9000}}, false};
  auto d = in_netns(pair_.a, [&] { return setup_links(dup); });
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("10.231.0.1 is already on veth-a, not veth-a2"), std::string::npos)
      << d.error().what();
}

TEST_F(FabricNetns, DfPingAt9000PassesBetweenJumboEnds) {
  setup_both(9000, 9000);
  auto rtt = in_netns(pair_.a, [] { return df_ping({kIpB, 9000, 3, 1000}); });  // raw ICMP socket (root)
  ASSERT_TRUE(rtt.ok()) << rtt.error().what();
  // Unprivileged ICMP sockets, the path a non-root doctor takes where ping_group_range allows it.
  auto sc =
      run_argv({"ip", "netns", "exec", pair_.a, "sysctl", "-w", "net.ipv4.ping_group_range=0 2147483647"});
  ASSERT_EQ(sc.code, 0) << sc.out;
  auto dgram = in_netns(pair_.a, [] { return df_ping({kIpB, 9000, 3, 1000}); });
  ASSERT_TRUE(dgram.ok()) << dgram.error().what();
  auto doc = in_netns(
      pair_.a, [&] { return run_doctor(doctor_req("veth-a", "10.231.0.1/30", kIpB), *kernel_net_view()); });
  ASSERT_TRUE(doc.ok());
  EXPECT_TRUE(doc->ok) << nlohmann::json(*doc).dump(1);
}

TEST_F(FabricNetns, DfPingFailsWithClearFindingWhenOneSideIs1500) {
  setup_both(9000, 1500);
  // From the jumbo side: the frame leaves, the 1500 side drops it, no reply.
  auto a = in_netns(
      pair_.a, [&] { return run_doctor(doctor_req("veth-a", "10.231.0.1/30", kIpB), *kernel_net_view()); });
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->ok);
  const Finding* ping = nullptr;
  for (auto& f : a->findings)
    if (f.check == "ping") ping = &f;
  ASSERT_TRUE(ping) << nlohmann::json(*a).dump(1);
  EXPECT_FALSE(ping->ok);
  EXPECT_NE(ping->message.find("DF ping of 9000 bytes to 10.231.0.2: no reply"), std::string::npos)
      << ping->message;
  EXPECT_NE(ping->fix.find("--mtu 9000"), std::string::npos);
  // From the 1500 side: the MTU check and the ping both say so.
  auto b = in_netns(
      pair_.b, [&] { return run_doctor(doctor_req("veth-b", "10.231.0.2/30", kIpA), *kernel_net_view()); });
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->ok);
  std::string all = nlohmann::json(*b).dump();
  EXPECT_NE(all.find("veth-b MTU 1500, wants 9000"), std::string::npos) << all;
  EXPECT_NE(all.find("cannot leave this node: path MTU here is 1500"), std::string::npos) << all;
  // At 1500 the same path is fine.
  auto ok1500 = in_netns(pair_.a, [] { return df_ping({kIpB, 1500, 3, 1000}); });
  EXPECT_TRUE(ok1500.ok()) << ok1500.error().what();
}

TEST_F(FabricNetns, BandwidthTestReportsGbits) {
  setup_both(9000, 9000);
  auto srv = in_netns(pair_.b, [] { return BwServer::listen(kIpB, 0); });
  ASSERT_TRUE(srv.ok()) << srv.error().what();
  const int port = srv->port();
  // The listening socket belongs to namespace b; serving it from any thread is fine.
  std::thread server([&] { (void)srv->serve(2, 20); });
  auto bw = in_netns(pair_.a, [&] { return bw_client(kIpB, port, 1ull << 30, 2.0); });
  ASSERT_TRUE(bw.ok()) << bw.error().what();
  EXPECT_GT(bw->bytes, 0u);
  EXPECT_GT(bw->gbit_per_s, 0.0);
  std::printf("[ fabric bw ] veth netns TCP: %.2f Gbit/s (%.0f MiB in %.2f s)\n", bw->gbit_per_s,
              double(bw->bytes) / (1 << 20), bw->seconds);
  auto req = doctor_req("veth-a", "10.231.0.1/30", kIpB);
  req.skip = {"rdma", "nccl"};
  req.bw_port = port;
  req.bw_seconds = 0.5;
  auto doc = in_netns(pair_.a, [&] { return run_doctor(req, *kernel_net_view()); });
  server.join();
  ASSERT_TRUE(doc.ok());
  EXPECT_TRUE(doc->ok) << nlohmann::json(*doc).dump(1);
  bool saw = false;
  for (auto& f : doc->findings)
    saw = saw || (f.check == "bw" && f.ok && f.message.find("Gbit/s") != std::string::npos);
  EXPECT_TRUE(saw) << nlohmann::json(*doc).dump(1);
}

TEST_F(FabricNetns, BandwidthWithoutServerIsAFinding) {
  setup_both(9000, 9000);
  auto req = doctor_req("veth-a", "10.231.0.1/30", kIpB);
  req.skip = {"rdma", "nccl", "ping"};
  req.bw_port = 29999;
  auto doc = in_netns(pair_.a, [&] { return run_doctor(req, *kernel_net_view()); });
  ASSERT_TRUE(doc.ok());
  EXPECT_FALSE(doc->ok);
  std::string all = nlohmann::json(*doc).dump();
  EXPECT_NE(all.find("cannot connect to 10.231.0.2:29999"), std::string::npos) << all;
  EXPECT_NE(all.find("fabric bw-serve"), std::string::npos) << all;
}

}  // namespace
}  // namespace spk::fabric
