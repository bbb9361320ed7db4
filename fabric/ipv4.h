// IPv4 addresses, CIDRs and the IPv4-mapped RoCE GID form. Pure functions, no I/O.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/base/status.h"

namespace spk::fabric {

// An IPv4 address with its prefix length: "192.168.100.1/24". `addr` is in host byte order.
struct Cidr {
  uint32_t addr = 0;
  int prefix = 32;

  [[nodiscard]] std::string ip() const;       // "192.168.100.1"
  [[nodiscard]] std::string str() const;      // "192.168.100.1/24"
  [[nodiscard]] std::string network() const;  // "192.168.100.0/24"
  [[nodiscard]] bool contains(uint32_t other) const;
};

// "a.b.c.d" -> host-order address. Error names the text.
Result<uint32_t> parse_ipv4(const std::string& text);
// "a.b.c.d/n" (or a bare address when `default_prefix` >= 0). Error names the text and the fix.
Result<Cidr> parse_cidr(const std::string& text, int default_prefix = -1);
std::string ipv4_str(uint32_t addr);

// The RoCE GID of an IPv4 address: "0000:0000:0000:0000:0000:ffff:c0a8:6401".
std::string ipv4_mapped_gid(uint32_t addr);
// True (and the address) when `gid` (sysfs form, 8 groups of 4 hex digits) is ::ffff:a.b.c.d.
bool gid_ipv4(const std::string& gid, uint32_t* addr);
// Short human form of a sysfs GID: "::ffff:192.168.100.1", "fe80::a288:c2ff:fe01:2", "::" for zero.
std::string gid_short(const std::string& gid);

}  // namespace spk::fabric
