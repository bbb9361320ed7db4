#include "fabric/net_view.h"

#include "fabric/rtnetlink.h"

namespace spk::fabric {

Result<std::vector<std::string>> NetView::addresses_of(const std::string& ifname) const {
  SPK_ASSIGN(auto all, addresses());
  std::vector<std::string> out;
  for (auto& a : all)
    if (a.ifname == ifname) out.push_back(a.cidr);
  return out;
}

namespace {

// Opens a fresh netlink socket per call, so the view follows the calling thread's namespace.
class KernelNetView : public NetView {
 public:
  Result<std::vector<IfAddr>> addresses() const override {
    SPK_ASSIGN(auto nl, Rtnl::open());
    return nl.addresses();
  }
  Result<LinkInfo> link(const std::string& ifname) const override {
    SPK_ASSIGN(auto nl, Rtnl::open());
    return nl.link(ifname);
  }
};

}  // namespace

std::unique_ptr<NetView> kernel_net_view() { return std::make_unique<KernelNetView>(); }

Result<StaticNetView> StaticNetView::from_json(const nlohmann::json& j) {
  StaticNetView v;
  try {
    if (j.contains("addresses")) v.addrs = j.at("addresses").get<std::vector<IfAddr>>();
    if (j.contains("links"))
      for (auto& l : j.at("links").get<std::vector<LinkInfo>>()) v.links[l.name] = l;
  } catch (const nlohmann::json::exception& e) {
    return make_error(
        std::string("bad address file: ") + e.what(),
        "write {\"addresses\": [{\"ifname\": \"enp1s0f0np0\", \"cidr\": \"192.168.100.1/24\"}]}");
  }
  return v;
}

Result<LinkInfo> StaticNetView::link(const std::string& ifname) const {
  auto it = links.find(ifname);
  if (it == links.end())
    return make_error("no network interface '" + ifname + "'", "pass the fabric netdev with --iface");
  return it->second;
}

}  // namespace spk::fabric
