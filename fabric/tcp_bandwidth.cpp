#include "fabric/tcp_bandwidth.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
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

constexpr size_t kChunk = 1 << 20;  // 1 MiB writes: few syscalls, well above the socket buffer

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

bool read_full(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n) {
    ssize_t r = ::recv(fd, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r, n -= size_t(r);
  }
  return true;
}

}  // namespace

Result<BwServer> BwServer::listen(const std::string& bind_ip, int port) {
  SPK_ASSIGN(uint32_t ip, parse_ipv4(bind_ip.empty() ? "0.0.0.0" : bind_ip));
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error(std::string("bandwidth server: socket: ") + std::strerror(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(uint16_t(port));
  sa.sin_addr.s_addr = htonl(ip);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 4) != 0) {
    int e = errno;
    ::close(fd);
    return make_error("bandwidth server: cannot listen on " + ipv4_str(ip) + ":" + std::to_string(port) +
                          ": " + std::strerror(e),
                      "pick a free port with --bw-port", e == EADDRINUSE);
  }
  socklen_t l = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &l);
  return BwServer(fd, ntohs(sa.sin_port));
}

BwServer::~BwServer() {
  if (fd_ >= 0) ::close(fd_);
}

Result<uint64_t> BwServer::serve(int connections, int accept_timeout_s) {
  uint64_t total = 0;
  std::vector<char> buf(kChunk);
  for (int i = 0; i < connections; ++i) {
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, accept_timeout_s * 1000) <= 0)
      return make_error("bandwidth server on port " + std::to_string(port_) + ": no client within " +
                            std::to_string(accept_timeout_s) + " s",
                        "run `sparkctl fabric doctor --peer <this IP>` on the other node", true);
    Fd c;
    c.fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c.fd < 0)
      return make_error(std::string("bandwidth server: accept: ") + std::strerror(errno), "", true);
    timeval tv{30, 0};
    ::setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    uint64_t got = 0;
    for (;;) {
      ssize_t r = ::recv(c.fd, buf.data(), buf.size(), 0);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += uint64_t(r);
    }
    uint64_t be = htobe64(got);
    (void)!::send(c.fd, &be, sizeof be, MSG_NOSIGNAL);
    total += got;
  }
  return total;
}

Result<BwResult> bw_client(const std::string& peer, int port, uint64_t max_bytes, double max_seconds) {
  SPK_ASSIGN(uint32_t ip, parse_ipv4(peer));
  const std::string where = peer + ":" + std::to_string(port);
  Fd s;
  s.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s.fd < 0) return make_error(std::string("bandwidth test: socket: ") + std::strerror(errno));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(uint16_t(port));
  sa.sin_addr.s_addr = htonl(ip);
  // Bounded connect: non-blocking + poll, 3 s.
  int fl = ::fcntl(s.fd, F_GETFL);
  ::fcntl(s.fd, F_SETFL, fl | O_NONBLOCK);
  int rc = ::connect(s.fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  int err = rc == 0 ? 0 : errno;
  if (err == EINPROGRESS) {
    pollfd pfd{s.fd, POLLOUT, 0};
    err = ::poll(&pfd, 1, 3000) == 1 ? 0 : ETIMEDOUT;
    socklen_t l = sizeof err;
    if (err == 0) ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &l);
  }
  if (err != 0)
    return make_error(
        "bandwidth test: cannot connect to " + where + ": " + std::strerror(err),
        "start `sparkctl fabric bw-serve --bind " + peer + "` on the peer (or let the orchestrator do it)",
        true);
  ::fcntl(s.fd, F_SETFL, fl);
  timeval tv{10, 0};
  ::setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(s.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);

  std::vector<char> buf(kChunk, 'x');
  const auto t0 = std::chrono::steady_clock::now();
  const auto stop = t0 + std::chrono::duration<double>(max_seconds);
  uint64_t sent = 0;
  while (sent < max_bytes && std::chrono::steady_clock::now() < stop) {
    size_t n = size_t(std::min<uint64_t>(buf.size(), max_bytes - sent));
    ssize_t w = ::send(s.fd, buf.data(), n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      return make_error("bandwidth test to " + where + ": send failed after " + std::to_string(sent) +
                            " bytes: " + std::strerror(errno),
                        "check the link and the peer's bandwidth server", true);
    sent += uint64_t(w);
  }
  ::shutdown(s.fd, SHUT_WR);
  uint64_t be = 0;
  if (!read_full(s.fd, &be, sizeof be))
    return make_error("bandwidth test to " + where + ": no byte count back from the server",
                      "check the peer runs `sparkctl fabric bw-serve`", true);
  BwResult r;
  r.peer = peer;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.bytes = be64toh(be);
  r.gbit_per_s = r.seconds > 0 ? double(r.bytes) * 8 / r.seconds / 1e9 : 0;
  if (r.bytes != sent)
    return make_error("bandwidth test to " + where + ": sent " + std::to_string(sent) + " bytes, peer got " +
                          std::to_string(r.bytes),
                      "check the link for resets (ip -s link)", true);
  return r;
}

}  // namespace spk::fabric
