// RoCE discovery from a sysfs root (default /sys): RDMA devices, their ports (state, rate, link layer),
// GID tables with types and netdevs, and the netdevs' MTU/state/MAC plus kernel-reported IPv4 addresses.
// Reads only; a missing or unreadable optional file leaves its field empty instead of failing.
//
// Layout read (real sysfs; fake trees in tests mirror it):
//   <root>/class/infiniband/<dev>/device -> PCI function (0000:01:00.0); device/net/<netdev>/
//   <root>/class/infiniband/<dev>/ports/<n>/{state,phys_state,rate,link_layer}
//   <root>/class/infiniband/<dev>/ports/<n>/gids/<i>, gid_attrs/{types,ndevs}/<i>
//   <root>/class/net/<netdev>/{mtu,operstate,address,speed}
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fabric/net_view.h"

namespace spk::fabric {

struct GidEntry {
  int index = 0;
  std::string gid;   // sysfs form: "0000:0000:0000:0000:0000:ffff:c0a8:6401"
  std::string type;  // "RoCE v2", "IB/RoCE v1"
  std::string ndev;  // netdev the entry belongs to (gid_attrs/ndevs), may be empty
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GidEntry, index, gid, type, ndev)

struct RdmaPort {
  int port = 1;
  std::string state;           // "4: ACTIVE"
  std::string phys_state;      // "5: LinkUp"
  std::string rate;            // "200 Gb/sec (4X HDR)"
  double rate_gbps = 0;        // parsed from rate; 0 when unknown
  std::string link_layer;      // "Ethernet" or "InfiniBand"
  std::vector<GidEntry> gids;  // only populated (non-zero) entries, by index

  [[nodiscard]] bool active() const;  // state says ACTIVE
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RdmaPort, port, state, phys_state, rate, rate_gbps,
                                                link_layer, gids)

struct RdmaDevice {
  std::string name;      // "rocep1s0f0"
  std::string pci;       // "0000:01:00.0" (from the device link), may be empty
  std::string half_key;  // same for both halves of one CX7 port: "01:00.0" (PCI minus domain) or "p1s0f0"
  std::vector<std::string> netdevs;  // from device/net: "enp1s0f0np0"
  std::vector<RdmaPort> ports;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RdmaDevice, name, pci, half_key, netdevs, ports)

struct Netdev {
  std::string name;
  int mtu = 0;
  std::string operstate;  // "up" / "down"
  std::string mac;
  int speed_mbps = -1;             // -1 when the kernel does not say (link down)
  std::vector<std::string> addrs;  // IPv4 CIDRs from the NetView
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(Netdev, name, mtu, operstate, mac, speed_mbps, addrs)

// Everything discovered on one node. JSON-serialisable: `sparkctl node fabric-show` answers with it.
struct NodeFabric {
  std::string node;                 // name used in messages ("node-b")
  std::string sysfs_root;           // where it was read
  std::vector<RdmaDevice> devices;  // sorted by PCI address, then name
  std::vector<Netdev> netdevs;      // every netdev of every device, sorted by name

  [[nodiscard]] const Netdev* netdev(const std::string& name) const;
  [[nodiscard]] const RdmaDevice* device(const std::string& name) const;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(NodeFabric, node, sysfs_root, devices, netdevs)

struct DiscoverRequest {
  std::string node;  // default: the hostname
  std::string sysfs_root = "/sys";
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(DiscoverRequest, node, sysfs_root)

// Reads the tree. No RDMA devices is not an error here (the GID choice reports it); an unreadable
// sysfs root is.
Result<NodeFabric> discover(const DiscoverRequest& req, const NetView& net);

// "rocep1s0f0" / "roceP2p1s0f0" -> "p1s0f0": the systemd name with the PCI-domain part removed.
std::string half_key_from_name(const std::string& dev);
// "200 Gb/sec (4X HDR)" -> 200; 0 when unparsable.
double parse_rate_gbps(const std::string& rate);

}  // namespace spk::fabric
