#include "fabric/sysfs_discovery.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>

namespace spk::fabric {
namespace fs = std::filesystem;
namespace {

// First line of a sysfs attribute, trimmed; empty when missing or unreadable (sysfs returns EINVAL
// for unused GID type entries: that is "no entry", not an error).
std::string attr(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return {};
  std::string line;
  std::getline(in, line);
  if (in.bad()) return {};
  while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
  return line;
}

int attr_int(const fs::path& p, int fallback) {
  const std::string s = attr(p);
  if (s.empty()) return fallback;
  try {
    return std::stoi(s);
  } catch (...) {
    return fallback;
  }
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

bool all_zero_gid(const std::string& g) {
  return g.empty() || g.find_first_not_of("0:") == std::string::npos;
}

RdmaPort read_port(const fs::path& dir, int n) {
  RdmaPort p;
  p.port = n;
  p.state = attr(dir / "state");
  p.phys_state = attr(dir / "phys_state");
  p.rate = attr(dir / "rate");
  p.rate_gbps = parse_rate_gbps(p.rate);
  p.link_layer = attr(dir / "link_layer");
  std::vector<int> idx;
  for (auto& e : entries(dir / "gids"))
    if (!e.empty() && std::all_of(e.begin(), e.end(), ::isdigit)) idx.push_back(std::stoi(e));
  std::sort(idx.begin(), idx.end());
  for (int i : idx) {
    GidEntry g;
    g.index = i;
    g.gid = attr(dir / "gids" / std::to_string(i));
    if (all_zero_gid(g.gid)) continue;
    g.type = attr(dir / "gid_attrs" / "types" / std::to_string(i));
    g.ndev = attr(dir / "gid_attrs" / "ndevs" / std::to_string(i));
    p.gids.push_back(std::move(g));
  }
  return p;
}

std::string default_hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

bool RdmaPort::active() const { return state.find("ACTIVE") != std::string::npos; }

const Netdev* NodeFabric::netdev(const std::string& name) const {
  for (auto& n : netdevs)
    if (n.name == name) return &n;
  return nullptr;
}

const RdmaDevice* NodeFabric::device(const std::string& name) const {
  for (auto& d : devices)
    if (d.name == name) return &d;
  return nullptr;
}

std::string half_key_from_name(const std::string& dev) {
  std::string s = dev.rfind("roce", 0) == 0 ? dev.substr(4) : dev;
  if (s.size() > 1 && s[0] == 'P' && std::isdigit(static_cast<unsigned char>(s[1]))) {
    size_t i = 1;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    s = s.substr(i);
  }
  return s;
}

double parse_rate_gbps(const std::string& rate) {
  std::istringstream in(rate);
  double v = 0;
  std::string unit;
  if (!(in >> v >> unit)) return 0;
  if (unit.rfind("Gb", 0) == 0) return v;
  if (unit.rfind("Mb", 0) == 0) return v / 1000;
  return 0;
}

Result<NodeFabric> discover(const DiscoverRequest& req, const NetView& net) {
  NodeFabric nf;
  nf.node = req.node.empty() ? default_hostname() : req.node;
  nf.sysfs_root = req.sysfs_root.empty() ? "/sys" : req.sysfs_root;
  const fs::path root(nf.sysfs_root);
  std::error_code ec;
  if (!fs::is_directory(root / "class", ec))
    return make_error(nf.node + ": sysfs root " + nf.sysfs_root + " has no class/ directory",
                      "pass the sysfs mount with --sysfs-root (default /sys)");

  std::vector<std::string> netdev_names;
  const fs::path ib = root / "class" / "infiniband";
  for (auto& name : entries(ib)) {
    RdmaDevice d;
    d.name = name;
    const fs::path dev = ib / name;
    fs::path target = fs::read_symlink(dev / "device", ec);
    if (!ec) d.pci = target.filename().string();
    ec.clear();
    // PCI "0000:01:00.0" -> "01:00.0": both halves of a CX7 port differ only in the PCI domain.
    auto colon = d.pci.find(':');
    d.half_key = colon != std::string::npos && d.pci.size() > colon + 1 ? d.pci.substr(colon + 1)
                                                                        : half_key_from_name(name);
    d.netdevs = entries(dev / "device" / "net");
    for (auto& p : entries(dev / "ports"))
      if (!p.empty() && std::all_of(p.begin(), p.end(), ::isdigit))
        d.ports.push_back(read_port(dev / "ports" / p, std::stoi(p)));
    std::sort(d.ports.begin(), d.ports.end(), [](auto& a, auto& b) { return a.port < b.port; });
    for (auto& n : d.netdevs) netdev_names.push_back(n);
    for (auto& p : d.ports)
      for (auto& g : p.gids)
        if (!g.ndev.empty()) netdev_names.push_back(g.ndev);
    nf.devices.push_back(std::move(d));
  }
  // PCI order puts the domain-0 half (rocep1s0f0) before its P2 twin, as the kernel enumerates them.
  std::sort(nf.devices.begin(), nf.devices.end(), [](const RdmaDevice& a, const RdmaDevice& b) {
    return std::tie(a.pci, a.name) < std::tie(b.pci, b.name);
  });
  std::sort(netdev_names.begin(), netdev_names.end());
  netdev_names.erase(std::unique(netdev_names.begin(), netdev_names.end()), netdev_names.end());

  SPK_ASSIGN(auto addrs, net.addresses());
  for (auto& name : netdev_names) {
    Netdev n;
    n.name = name;
    const fs::path p = root / "class" / "net" / name;
    n.mtu = attr_int(p / "mtu", 0);
    n.operstate = attr(p / "operstate");
    n.mac = attr(p / "address");
    n.speed_mbps = attr_int(p / "speed", -1);
    for (auto& a : addrs)
      if (a.ifname == name) n.addrs.push_back(a.cidr);
    nf.netdevs.push_back(std::move(n));
  }
  return nf;
}

}  // namespace spk::fabric
