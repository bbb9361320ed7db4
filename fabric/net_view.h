// What the kernel says about network interfaces: IPv4 addresses, MTU, admin/oper state. Addresses come
// from the kernel (rtnetlink), never from sysfs; tests and fake sysfs trees inject a StaticNetView.
// All calls act in the calling thread's network namespace.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace spk::fabric {

struct IfAddr {
  std::string ifname;
  std::string cidr;  // "192.168.100.1/24"
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(IfAddr, ifname, cidr)

struct LinkInfo {
  std::string name;
  int index = 0;
  int mtu = 0;
  bool admin_up = false;  // IFF_UP
  std::string operstate;  // "up", "down", "unknown", "lowerlayerdown", ...
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LinkInfo, name, index, mtu, admin_up, operstate)

class NetView {
 public:
  virtual ~NetView() = default;
  // Every IPv4 address of every interface.
  virtual Result<std::vector<IfAddr>> addresses() const = 0;
  // One interface; error names it when it does not exist.
  virtual Result<LinkInfo> link(const std::string& ifname) const = 0;

  // The addresses of one interface (convenience over addresses()).
  Result<std::vector<std::string>> addresses_of(const std::string& ifname) const;
};

// The live kernel through rtnetlink, in the calling thread's network namespace.
std::unique_ptr<NetView> kernel_net_view();

// Fixed answers, for fake sysfs trees: JSON {"addresses": [{"ifname":..,"cidr":..}], "links": [LinkInfo]}.
class StaticNetView : public NetView {
 public:
  std::vector<IfAddr> addrs;
  std::map<std::string, LinkInfo> links;

  static Result<StaticNetView> from_json(const nlohmann::json& j);
  Result<std::vector<IfAddr>> addresses() const override { return addrs; }
  Result<LinkInfo> link(const std::string& ifname) const override;
};

}  // namespace spk::fabric
