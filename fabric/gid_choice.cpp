#include "fabric/gid_choice.h"

#include <algorithm>

#include "fabric/ipv4.h"

namespace spk::fabric {
namespace {

constexpr const char* kSetupFix = "run `sparkctl fabric setup` to assign the fabric IP, or check the cable";

bool is_roce_port(const RdmaPort& p) { return p.link_layer.empty() || p.link_layer == "Ethernet"; }

// The RoCE v2 entry whose GID is ::ffff:<want>, or (want == 0) any IPv4-mapped one inside `subnet`.
const GidEntry* find_v2(const RdmaPort& p, uint32_t want, const Cidr& subnet) {
  const GidEntry* in_subnet = nullptr;
  for (auto& g : p.gids) {
    uint32_t v4 = 0;
    if (g.type != "RoCE v2" || !gid_ipv4(g.gid, &v4)) continue;
    if (v4 == want) return &g;
    if (want == 0 && subnet.contains(v4) && !in_subnet) in_subnet = &g;
  }
  return in_subnet;
}

HcaChoice make_choice(const RdmaDevice& d, const RdmaPort& p, const GidEntry& g) {
  HcaChoice c;
  c.device = d.name;
  c.port = p.port;
  c.gid_index = g.index;
  c.gid = gid_short(g.gid);
  uint32_t v4 = 0;
  gid_ipv4(g.gid, &v4);
  c.ip = ipv4_str(v4);
  c.netdev = !g.ndev.empty() ? g.ndev : (d.netdevs.empty() ? "" : d.netdevs.front());
  c.rate_gbps = p.rate_gbps;
  return c;
}

const RdmaPort* first_roce_port(const RdmaDevice& d) {
  for (auto& p : d.ports)
    if (is_roce_port(p)) return &p;
  return nullptr;
}

std::string no_gid_message(const std::string& node, const RdmaDevice& d, const RdmaPort* p,
                           const std::string& ip) {
  if (!p) return node + ": " + d.name + " has no RoCE port (link_layer Ethernet) for " + ip;
  return node + ": " + d.name + " port " + std::to_string(p->port) + " has no RoCE v2 GID for " + ip +
         " (table: " + format_gid_table(*p) + ")";
}

// The device a human would expect to carry the fabric IP: its netdev holds the IP, else the first
// active RoCE device, else the first device.
const RdmaDevice* expected_device(const NodeFabric& node, const Cidr& fab) {
  for (auto& d : node.devices)
    for (auto& nd : d.netdevs)
      if (auto* n = node.netdev(nd))
        for (auto& a : n->addrs)
          if (a.substr(0, a.find('/')) == fab.ip()) return &d;
  for (auto& d : node.devices)
    if (auto* p = first_roce_port(d); p && p->active()) return &d;
  return node.devices.empty() ? nullptr : &node.devices.front();
}

}  // namespace

std::string GidPlan::hca_list() const {
  std::string s;
  for (auto& h : hcas) s += (s.empty() ? "" : ",") + h.device;
  return s;
}

std::string format_gid_table(const RdmaPort& port) {
  if (port.gids.empty()) return "empty";
  std::string s;
  for (auto& g : port.gids)
    s += (s.empty() ? "" : ", ") + std::to_string(g.index) + " " + gid_short(g.gid) + " " +
         (g.type.empty() ? "?" : g.type);
  return s;
}

Result<GidPlan> choose_gids(const NodeFabric& node, const GidRequest& req) {
  SPK_ASSIGN(Cidr fab, parse_cidr(req.fabric_cidr));
  GidPlan plan;
  plan.node = node.node;
  plan.fabric_cidr = fab.str();
  if (node.devices.empty())
    return make_error(node.node + ": no RDMA device under " + node.sysfs_root + "/class/infiniband",
                      "load the CX7 driver (modprobe mlx5_ib) or pass the right --sysfs-root");

  // Primary: holds ::ffff:<fabric IP> as a RoCE v2 GID.
  const RdmaDevice* primary = nullptr;
  const RdmaPort* primary_port = nullptr;
  const GidEntry* primary_gid = nullptr;
  std::vector<const RdmaDevice*> pool;
  if (!req.hcas.empty()) {
    for (auto& name : req.hcas) {
      auto* d = node.device(name);
      if (!d) {
        std::string have;
        for (auto& x : node.devices) have += (have.empty() ? "" : ", ") + x.name;
        return make_error(node.node + ": RDMA device '" + name + "' not found (have: " + have + ")",
                          "fix the HCA list in the recipe/inventory or leave it empty to choose");
      }
      pool.push_back(d);
    }
  } else {
    for (auto& d : node.devices) pool.push_back(&d);
  }
  for (auto* d : pool) {
    for (auto& p : d->ports) {
      if (!is_roce_port(p)) continue;
      if (auto* g = find_v2(p, fab.addr, fab)) {
        primary = d, primary_port = &p, primary_gid = g;
        break;
      }
    }
    if (primary) break;
  }
  if (!primary) {
    const RdmaDevice* d = req.hcas.empty() ? expected_device(node, fab) : pool.front();
    return make_error(no_gid_message(node.node, *d, first_roce_port(*d), fab.ip()), kSetupFix);
  }
  plan.hcas.push_back(make_choice(*primary, *primary_port, *primary_gid));
  plan.netdev = plan.hcas.front().netdev;

  // The rest: the explicit list, or the other CX7 half of the primary.
  std::vector<const RdmaDevice*> rest;
  for (auto* d : pool)
    if (d != primary && (!req.hcas.empty() || d->half_key == primary->half_key)) rest.push_back(d);
  for (auto* d : rest) {
    const RdmaPort* p = first_roce_port(*d);
    const std::string nd = d->netdevs.empty() ? d->name : d->netdevs.front();
    std::string reason, fix;
    const GidEntry* g = nullptr;
    if (!p) {
      reason = "no RoCE port";
      fix = "check that " + d->name + " is a RoCE (Ethernet) device";
    } else if (!p->active()) {
      reason = "port " + std::to_string(p->port) + " state " + (p->state.empty() ? "unknown" : p->state);
      fix = "bring " + nd + " up and check the cable (both halves are needed for 200G)";
    } else if (!(g = find_v2(*p, 0, fab))) {
      reason = "port " + std::to_string(p->port) + " has no RoCE v2 GID in " + fab.network() +
               " (table: " + format_gid_table(*p) + ")";
      fix = "assign an address in " + fab.network() + " to " + nd + " (sparkctl fabric setup --iface " + nd +
            " --ip A.B.C.D/" + std::to_string(fab.prefix) + ")";
    }
    if (g) {
      plan.hcas.push_back(make_choice(*d, *p, *g));
    } else if (!req.hcas.empty()) {
      return make_error(node.node + ": " + d->name + " " + reason, fix);
    } else {
      plan.skipped.push_back({d->name, reason, fix});
    }
  }
  for (auto& h : plan.hcas)
    plan.indices_agree = plan.indices_agree && h.gid_index == plan.hcas.front().gid_index;
  return plan;
}

}  // namespace spk::fabric
