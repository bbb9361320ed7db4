// `fabric setup` on one node (root): for each fabric link, add the inventory's IPv4/CIDR when missing,
// set the MTU (default 9000; a reboot resets it to 1500), bring the link up. Idempotent: a second run
// with the same request changes nothing and says so. Acts through rtnetlink in the calling thread's
// network namespace.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace spk::fabric {

struct LinkSetup {
  std::string iface;  // "enp1s0f0np0"
  std::string cidr;   // "192.168.100.1/24"; empty = leave addresses alone
  int mtu = 9000;     // 0 = leave the MTU alone
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LinkSetup, iface, cidr, mtu)

struct SetupRequest {
  std::string node;  // for messages
  std::vector<LinkSetup> links;
  bool dry_run = false;  // report what would change, change nothing
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SetupRequest, node, links, dry_run)

struct SetupChange {
  std::string iface;
  std::string what;  // "mtu", "address", "up"
  std::string from;  // "1500"
  std::string to;    // "9000"
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SetupChange, iface, what, from, to)

struct SetupResult {
  std::string node;
  std::vector<SetupChange> changes;  // empty = already as requested
  bool dry_run = false;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(SetupResult, node, changes, dry_run)

// Errors: unknown iface (names the ones present), the same IP with another prefix already on the
// iface (never silently replaced), permission (needs root), kernel refusals (e.g. MTU above the max).
Result<SetupResult> setup_links(const SetupRequest& req);

std::string describe(const SetupChange& c);  // "enp1s0f0np0: mtu 1500 -> 9000"

}  // namespace spk::fabric
