#include "fabric/link_setup.h"

#include "fabric/ipv4.h"
#include "fabric/rtnetlink.h"

namespace spk::fabric {

std::string describe(const SetupChange& c) {
  if (c.what == "address") return c.iface + ": added address " + c.to;
  if (c.what == "up") return c.iface + ": link " + c.from + " -> " + c.to;
  return c.iface + ": " + c.what + " " + c.from + " -> " + c.to;
}

Result<SetupResult> setup_links(const SetupRequest& req) {
  SetupResult res;
  res.node = req.node;
  res.dry_run = req.dry_run;
  if (req.links.empty())
    return make_error("fabric setup: no link given",
                      "pass --iface NAME (and --ip CIDR) for the fabric netdev");
  SPK_ASSIGN(auto nl, Rtnl::open());
  const std::string who = req.node.empty() ? "" : req.node + ": ";
  for (auto& ls : req.links) {
    SPK_ASSIGN(LinkInfo li, nl.link(ls.iface));
    // Address first: validating it before touching anything keeps a bad request side-effect free.
    if (!ls.cidr.empty()) {
      SPK_ASSIGN(Cidr want, parse_cidr(ls.cidr));
      SPK_ASSIGN(auto all, nl.addresses());
      bool have = false;
      for (auto& a : all) {
        auto c = parse_cidr(a.cidr);
        if (!c.ok() || c->addr != want.addr) continue;
        if (a.ifname != ls.iface)
          return make_error(who + want.ip() + " is already on " + a.ifname + ", not " + ls.iface,
                            "remove it there (ip addr del " + a.cidr + " dev " + a.ifname +
                                ") or fix the fabric iface in the inventory");
        if (c->prefix != want.prefix)
          return make_error(who + ls.iface + " has " + a.cidr + ", the inventory says " + want.str(),
                            "fix the inventory prefix or replace the address by hand");
        have = true;
      }
      if (!have) {
        if (!req.dry_run) SPK_TRY(nl.add_address(li.index, want));
        res.changes.push_back({ls.iface, "address", "", want.str()});
      }
    }
    if (ls.mtu > 0 && li.mtu != ls.mtu) {
      if (ls.mtu < 68 || ls.mtu > 65535)
        return make_error(who + "MTU " + std::to_string(ls.mtu) + " is out of range",
                          "use --mtu 9000 (or 1500)");
      if (!req.dry_run) {
        auto st = nl.set_mtu(li.index, ls.mtu);
        if (!st.ok())
          return make_error(who + ls.iface + ": " + st.error().message,
                            st.error().fix.empty()
                                ? "check the NIC's max MTU (ip -d link show " + ls.iface + ")"
                                : st.error().fix);
      }
      res.changes.push_back({ls.iface, "mtu", std::to_string(li.mtu), std::to_string(ls.mtu)});
    }
    if (!li.admin_up) {
      if (!req.dry_run) SPK_TRY(nl.set_up(li.index));
      res.changes.push_back({ls.iface, "up", "down", "up"});
    }
  }
  return res;
}

}  // namespace spk::fabric
