// GID choice per node. NCCL_IB_GID_INDEX must be the index i with gid_attrs/types/i == "RoCE v2" and
// gids/i == ::ffff:<this node's fabric IPv4>. The index differs between nodes (3 on one, 5 on the other)
// and drifts after reboot, so it is resolved on each node from its own table, never copied.
//
// Device selection: the primary device is the one whose table holds the fabric IP as a RoCE v2 GID
// (or the first of an explicit list). Its other CX7 half (same half_key) is added when it is active and
// has a RoCE v2 GID in the fabric subnet; otherwise it is listed in `skipped` with the reason and fix
// (that node then runs at ~100G, which `fabric doctor` reports).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fabric/sysfs_discovery.h"

namespace spk::fabric {

struct GidRequest {
  std::string fabric_cidr;        // this node's fabric address, "192.168.100.2/24"
  std::vector<std::string> hcas;  // explicit RDMA devices (recipe/inventory); empty = choose
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GidRequest, fabric_cidr, hcas)

struct HcaChoice {
  std::string device;  // "rocep1s0f0"
  int port = 1;
  int gid_index = -1;
  std::string gid;     // short form "::ffff:192.168.100.2"
  std::string ip;      // the IPv4 inside the GID
  std::string netdev;  // the GID's netdev
  double rate_gbps = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(HcaChoice, device, port, gid_index, gid, ip, netdev,
                                                rate_gbps)

struct SkippedHca {
  std::string device;
  std::string reason;  // "port 1 state 1: DOWN"
  std::string fix;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SkippedHca, device, reason, fix)

struct GidPlan {
  std::string node;
  std::string fabric_cidr;
  std::string netdev;           // netdev of the primary device: NCCL_SOCKET_IFNAME / GLOO_SOCKET_IFNAME
  std::vector<HcaChoice> hcas;  // primary first; never empty in a returned plan
  std::vector<SkippedHca> skipped;
  bool indices_agree = true;  // one NCCL_IB_GID_INDEX fits every chosen device

  [[nodiscard]] std::string hca_list() const;  // "rocep1s0f0,roceP2p1s0f0"
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GidPlan, node, fabric_cidr, netdev, hcas, skipped,
                                                indices_agree)

// Error when no usable GID exists: names the node, device, port, the IP and what the table holds:
// "node-b: rocep1s0f0 port 1 has no RoCE v2 GID for 192.168.100.2 (table: 0 fe80::1 IB/RoCE v1, ...)".
Result<GidPlan> choose_gids(const NodeFabric& node, const GidRequest& req);

// "0 fe80::1 IB/RoCE v1, 1 fe80::1 RoCE v2" or "empty".
std::string format_gid_table(const RdmaPort& port);

}  // namespace spk::fabric
