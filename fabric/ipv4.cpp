#include "fabric/ipv4.h"

#include <arpa/inet.h>

#include <cstdio>

namespace spk::fabric {

std::string ipv4_str(uint32_t addr) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 255, (addr >> 8) & 255,
                addr & 255);
  return buf;
}

static uint32_t mask_of(int prefix) { return prefix <= 0 ? 0 : (prefix >= 32 ? ~0u : ~0u << (32 - prefix)); }

std::string Cidr::ip() const { return ipv4_str(addr); }
std::string Cidr::str() const { return ip() + "/" + std::to_string(prefix); }
std::string Cidr::network() const { return ipv4_str(addr & mask_of(prefix)) + "/" + std::to_string(prefix); }
bool Cidr::contains(uint32_t other) const { return (addr & mask_of(prefix)) == (other & mask_of(prefix)); }

Result<uint32_t> parse_ipv4(const std::string& text) {
  in_addr a{};
  if (::inet_pton(AF_INET, text.c_str(), &a) != 1)
    return make_error("'" + text + "' is not an IPv4 address", "write it as a.b.c.d, e.g. 192.168.100.1");
  return ntohl(a.s_addr);
}

Result<Cidr> parse_cidr(const std::string& text, int default_prefix) {
  auto slash = text.find('/');
  Cidr c;
  if (slash == std::string::npos) {
    if (default_prefix < 0)
      return make_error("'" + text + "' has no prefix length",
                        "write the fabric IP as a.b.c.d/n, e.g. 192.168.100.1/24");
    c.prefix = default_prefix;
  } else {
    const std::string p = text.substr(slash + 1);
    if (p.empty() || p.size() > 2 || p.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(p) > 32)
      return make_error("'" + text + "' has a bad prefix length", "use a prefix from 0 to 32, e.g. /24");
    c.prefix = std::stoi(p);
  }
  SPK_ASSIGN(c.addr, parse_ipv4(text.substr(0, slash)));
  return c;
}

std::string ipv4_mapped_gid(uint32_t addr) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "0000:0000:0000:0000:0000:ffff:%04x:%04x", addr >> 16, addr & 0xffff);
  return buf;
}

// Parses the 8 x 16-bit groups of a sysfs GID; false on anything else.
static bool gid_groups(const std::string& gid, uint16_t out[8]) {
  in6_addr a{};
  if (::inet_pton(AF_INET6, gid.c_str(), &a) != 1) return false;
  for (int i = 0; i < 8; ++i) out[i] = uint16_t(a.s6_addr[2 * i] << 8 | a.s6_addr[2 * i + 1]);
  return true;
}

bool gid_ipv4(const std::string& gid, uint32_t* addr) {
  uint16_t g[8];
  if (!gid_groups(gid, g)) return false;
  for (int i = 0; i < 5; ++i)
    if (g[i] != 0) return false;
  if (g[5] != 0xffff) return false;
  if (addr) *addr = uint32_t(g[6]) << 16 | g[7];
  return true;
}

std::string gid_short(const std::string& gid) {
  uint32_t v4 = 0;
  if (gid_ipv4(gid, &v4)) return "::ffff:" + ipv4_str(v4);
  in6_addr a{};
  if (::inet_pton(AF_INET6, gid.c_str(), &a) != 1) return gid;
  char buf[INET6_ADDRSTRLEN];
  return ::inet_ntop(AF_INET6, &a, buf, sizeof buf) ? std::string(buf) : gid;
}

}  // namespace spk::fabric
