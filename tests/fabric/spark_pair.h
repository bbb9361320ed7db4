// Fake 2-node DGX Spark pair (+ a broken third node) for the fabric unit tests.
//   spark-a 192.168.100.1/24: both CX7 halves up; RoCE v2 GID of the fabric IP at index 3 on each half
//   spark-b 192.168.100.2/24: global IPv6 entries first, so the IPv4 RoCE v2 GID sits at index 5;
//                             the second half (roceP2p1s0f0) is down and has only link-local entries
//   spark-c 192.168.100.5/24: RoCE v1 entries only: no usable GID
#pragma once

#include <memory>

#include "fabric/sysfs_discovery.h"
#include "tests/fabric/fake_sysfs.h"

namespace spk::fabric::testing {

struct FakeNode {
  std::string name;
  std::string cidr;
  std::unique_ptr<FakeSysfs> sysfs = std::make_unique<FakeSysfs>();
  StaticNetView net;

  NodeFabric discover_or_die() const {
    auto r = discover({name, sysfs->root()}, net);
    if (!r.ok()) throw std::runtime_error(r.error().what());
    return *r;
  }
};

inline LinkInfo up_link(const std::string& name, int mtu = 9000) { return {name, 2, mtu, true, "up"}; }

inline FakeNode spark_a() {
  FakeNode n{"spark-a", "192.168.100.1/24"};
  n.sysfs->add({"rocep1s0f0", "0000:01:00.0", "enp1s0f0np0", "4: ACTIVE", "200 Gb/sec (4X HDR)",
                roce_table("192.168.100.1")});
  n.sysfs->add({"roceP2p1s0f0", "0002:01:00.0", "enP2p1s0f0np0", "4: ACTIVE", "200 Gb/sec (4X HDR)",
                roce_table("192.168.100.3")});
  n.net.addrs = {
      {"enp1s0f0np0", "192.168.100.1/24"}, {"enP2p1s0f0np0", "192.168.100.3/24"}, {"eth0", "10.0.0.5/24"}};
  n.net.links = {{"enp1s0f0np0", up_link("enp1s0f0np0")}, {"enP2p1s0f0np0", up_link("enP2p1s0f0np0")}};
  return n;
}

inline FakeNode spark_b() {
  FakeNode n{"spark-b", "192.168.100.2/24"};
  n.sysfs->add({"rocep1s0f0", "0000:01:00.0", "enp1s0f0np0", "4: ACTIVE", "200 Gb/sec (4X HDR)",
                roce_table("192.168.100.2", /*ipv6_first=*/true)});
  FakeDevice down{"roceP2p1s0f0", "0002:01:00.0",       "enP2p1s0f0np0",
                  "1: DOWN",      "10 Gb/sec (4X SDR)", roce_table("")};
  down.operstate = "down";
  n.sysfs->add(down);
  n.net.addrs = {{"enp1s0f0np0", "192.168.100.2/24"}};
  n.net.links = {{"enp1s0f0np0", up_link("enp1s0f0np0")}};
  return n;
}

inline FakeNode spark_c() {
  FakeNode n{"spark-c", "192.168.100.5/24"};
  n.sysfs->add({"rocep1s0f0",
                "0000:01:00.0",
                "enp1s0f0np0",
                "4: ACTIVE",
                "200 Gb/sec (4X HDR)",
                {{0, kLinkLocal, "IB/RoCE v1"}, {1, v4("192.168.100.5"), "IB/RoCE v1"}}});
  n.net.addrs = {{"enp1s0f0np0", "192.168.100.5/24"}};
  n.net.links = {{"enp1s0f0np0", up_link("enp1s0f0np0")}};
  return n;
}

}  // namespace spk::fabric::testing
