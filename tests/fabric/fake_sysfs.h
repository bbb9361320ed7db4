// Builds fake sysfs trees shaped like a real one (class/ entries are symlinks into devices/, the RDMA
// device's `device` link points at its PCI function, netdevs live under the PCI function), so discovery
// is exercised through the same links it follows on a node. Removed on destruction.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "fabric/ipv4.h"

namespace spk::fabric::testing {

struct FakeGid {
  int index;
  std::string gid;   // sysfs form, see v4()/v6()
  std::string type;  // "RoCE v2" / "IB/RoCE v1"
};

inline std::string v4(const std::string& ip) { return ipv4_mapped_gid(*parse_ipv4(ip)); }
inline constexpr const char* kLinkLocal = "fe80:0000:0000:0000:a288:c2ff:fe01:0001";
inline constexpr const char* kGlobal6 = "2001:0db8:0000:0000:0000:0000:0000:0002";

struct FakeDevice {
  std::string name;    // "rocep1s0f0"
  std::string pci;     // "0000:01:00.0"
  std::string netdev;  // "enp1s0f0np0"
  std::string state = "4: ACTIVE";
  std::string rate = "200 Gb/sec (4X HDR)";
  std::vector<FakeGid> gids;
  int mtu = 9000;
  std::string operstate = "up";
  int table_size = 16;  // gids/0..N-1 exist; unused ones read all-zero, as on a node
};

class FakeSysfs {
 public:
  FakeSysfs() {
    char tmpl[] = "/tmp/spk-fake-sysfs-XXXXXX";
    root_ = ::mkdtemp(tmpl);
    std::filesystem::create_directories(root_ / "class" / "infiniband");
    std::filesystem::create_directories(root_ / "class" / "net");
  }
  ~FakeSysfs() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;

  [[nodiscard]] std::string root() const { return root_.string(); }

  void add(const FakeDevice& d) {
    namespace fs = std::filesystem;
    const fs::path pci = root_ / "devices" / "pci0000:00" / d.pci;
    const fs::path dev = pci / "infiniband" / d.name;
    const fs::path port = dev / "ports" / "1";
    fs::create_directories(port / "gids");
    fs::create_directories(port / "gid_attrs" / "types");
    fs::create_directories(port / "gid_attrs" / "ndevs");
    put(port / "state", d.state);
    put(port / "phys_state", d.state.find("ACTIVE") != std::string::npos ? "5: LinkUp" : "3: Disabled");
    put(port / "rate", d.rate);
    put(port / "link_layer", "Ethernet");
    for (int i = 0; i < d.table_size; ++i)
      put(port / "gids" / std::to_string(i), "0000:0000:0000:0000:0000:0000:0000:0000");
    for (auto& g : d.gids) {
      put(port / "gids" / std::to_string(g.index), g.gid);
      put(port / "gid_attrs" / "types" / std::to_string(g.index), g.type);
      put(port / "gid_attrs" / "ndevs" / std::to_string(g.index), d.netdev);
    }
    const fs::path net = pci / "net" / d.netdev;
    fs::create_directories(net);
    put(net / "mtu", std::to_string(d.mtu));
    put(net / "operstate", d.operstate);
    put(net / "address", "a0:88:c2:01:00:01");
    put(net / "speed", d.operstate == "up" ? "100000" : "");
    fs::create_directory_symlink("../../../" + d.pci, dev / "device");
    fs::create_directory_symlink("../../devices/pci0000:00/" + d.pci + "/infiniband/" + d.name,
                                 root_ / "class" / "infiniband" / d.name);
    fs::create_directory_symlink("../../devices/pci0000:00/" + d.pci + "/net/" + d.netdev,
                                 root_ / "class" / "net" / d.netdev);
  }

 private:
  static void put(const std::filesystem::path& p, const std::string& v) { std::ofstream(p) << v << "\n"; }
  std::filesystem::path root_;
};

// The standard GID table of one netdev holding `ip`: fe80 v1, fe80 v2, [global IPv6 v1/v2], ip v1, ip v2.
inline std::vector<FakeGid> roce_table(const std::string& ip, bool ipv6_first = false) {
  std::vector<FakeGid> t = {{0, kLinkLocal, "IB/RoCE v1"}, {1, kLinkLocal, "RoCE v2"}};
  int i = 2;
  if (ipv6_first) {
    t.push_back({i++, kGlobal6, "IB/RoCE v1"});
    t.push_back({i++, kGlobal6, "RoCE v2"});
  }
  if (!ip.empty()) {
    t.push_back({i++, v4(ip), "IB/RoCE v1"});
    t.push_back({i++, v4(ip), "RoCE v2"});
  }
  return t;
}

}  // namespace spk::fabric::testing
