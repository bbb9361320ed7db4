#include "fabric/df_ping.h"

#include <arpa/inet.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "fabric/ipv4.h"

namespace spk::fabric {
namespace {

uint16_t checksum(const uint8_t* p, size_t n) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < n; i += 2) sum += uint32_t(p[i] << 8 | p[i + 1]);
  if (n & 1) sum += uint32_t(p[n - 1] << 8);
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return htons(uint16_t(~sum));
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

Result<double> df_ping(const PingRequest& req) {
  SPK_ASSIGN(uint32_t peer, parse_ipv4(req.peer));
  const std::string what = "DF ping of " + std::to_string(req.mtu) + " bytes to " + req.peer;
  if (req.mtu < 68) return make_error(what + ": MTU too small", "use --mtu 1500 or more");
  Fd s;
  bool raw = false;
  s.fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_ICMP);
  if (s.fd < 0) {
    s.fd = ::socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP);
    raw = true;
  }
  if (s.fd < 0)
    return make_error(what + ": cannot open an ICMP socket: " + std::strerror(errno),
                      "run as root or allow ping sockets (sysctl net.ipv4.ping_group_range)");
  int pmtu = IP_PMTUDISC_DO;
  ::setsockopt(s.fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_addr.s_addr = htonl(peer);
  if (::connect(s.fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0)
    return make_error(what + ": no route: " + std::strerror(errno),
                      "check the fabric IP and subnet on both nodes");

  const size_t icmp_len = size_t(req.mtu) - 20;  // echo header (8) + payload (mtu - 28)
  std::vector<uint8_t> pkt(icmp_len, 0);
  for (size_t i = 8; i < pkt.size(); ++i) pkt[i] = uint8_t(i);
  const uint16_t id = uint16_t(::getpid());
  std::vector<uint8_t> buf(65536);
  for (int attempt = 0; attempt < req.attempts; ++attempt) {
    auto* h = reinterpret_cast<icmphdr*>(pkt.data());
    h->type = ICMP_ECHO;
    h->code = 0;
    h->un.echo.id = htons(id);
    h->un.echo.sequence = htons(uint16_t(attempt + 1));
    h->checksum = 0;
    h->checksum = checksum(pkt.data(), pkt.size());
    const auto t0 = std::chrono::steady_clock::now();
    if (::send(s.fd, pkt.data(), pkt.size(), 0) < 0) {
      if (errno == EMSGSIZE) {
        int local = 0;
        socklen_t l = sizeof local;
        ::getsockopt(s.fd, IPPROTO_IP, IP_MTU, &local, &l);
        return make_error(what + " cannot leave this node: path MTU here is " + std::to_string(local),
                          "set MTU " + std::to_string(req.mtu) +
                              " on the fabric netdev (sparkctl fabric setup --mtu " +
                              std::to_string(req.mtu) + ")");
      }
      return make_error(what + ": send failed: " + std::strerror(errno), "check the fabric link is up");
    }
    const auto deadline = t0 + std::chrono::milliseconds(req.timeout_ms);
    for (;;) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd pfd{s.fd, POLLIN, 0};
      if (::poll(&pfd, 1, int(left.count())) <= 0) break;
      ssize_t n = ::recv(s.fd, buf.data(), buf.size(), 0);
      if (n <= 0) continue;
      size_t off = 0;
      if (raw) {
        off = size_t(buf[0] & 0x0f) * 4;  // raw sockets deliver the IP header too
        if (size_t(n) < off + sizeof(icmphdr)) continue;
      }
      auto* r = reinterpret_cast<const icmphdr*>(buf.data() + off);
      if (r->type != ICMP_ECHOREPLY || ntohs(r->un.echo.sequence) != uint16_t(attempt + 1)) continue;
      if (raw && ntohs(r->un.echo.id) != id) continue;
      if (size_t(n) - off != icmp_len) continue;  // a truncated reply is no proof
      return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
  }
  return make_error(what + ": no reply to " + std::to_string(req.attempts) + " echoes (payload " +
                        std::to_string(req.mtu - 28) + "); a hop or the peer has a smaller MTU",
                    "set MTU " + std::to_string(req.mtu) + " on both nodes (sparkctl fabric setup --mtu " +
                        std::to_string(req.mtu) + " on each) and check the peer IP",
                    true);
}

}  // namespace spk::fabric
