#include "runtime/dist/frame_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace spk::rt::dist {

Result<HostPort> parse_host_port(const std::string& s) {
  auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size())
    return make_error("rendezvous address '" + s + "' is not host:port",
                      "pass master as e.g. 10.0.0.1:29500");
  HostPort hp{s.substr(0, colon), 0};
  try {
    size_t used = 0;
    hp.port = std::stoi(s.substr(colon + 1), &used);
    if (used != s.size() - colon - 1) throw std::invalid_argument("junk");
  } catch (const std::exception&) {
    return make_error("rendezvous port in '" + s + "' is not a number", "pass master as host:port");
  }
  if (hp.port < 0 || hp.port > 65535)
    return make_error("rendezvous port in '" + s + "' is out of range", "use 1..65535");
  return hp;
}

FrameSocket& FrameSocket::operator=(FrameSocket&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void FrameSocket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void FrameSocket::shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

static int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

Status FrameSocket::io(char* p, size_t n, bool write, Clock::time_point deadline, bool* eof_at_start) {
  size_t done = 0;
  while (done < n) {
    pollfd pfd{fd_, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    int pr = ::poll(&pfd, 1, ms_left(deadline));
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) return make_error("timed out", "", true);
    ssize_t r = write ? ::send(fd_, p + done, n - done, MSG_NOSIGNAL) : ::recv(fd_, p + done, n - done, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r < 0) return make_error(std::string("connection error: ") + std::strerror(errno));
    if (r == 0) {
      if (eof_at_start && done == 0) *eof_at_start = true;
      return make_error("eof: connection closed by the peer");
    }
    done += static_cast<size_t>(r);
  }
  return {};
}

Status FrameSocket::send(const std::string& payload, Clock::time_point deadline) {
  if (payload.size() > kMaxFrame)
    return make_error("frame of " + std::to_string(payload.size()) + " bytes exceeds the limit");
  std::string buf(4 + payload.size(), '\0');
  uint32_t n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) buf[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  std::memcpy(buf.data() + 4, payload.data(), payload.size());
  return io(buf.data(), buf.size(), true, deadline, nullptr);
}

Result<std::string> FrameSocket::recv(Clock::time_point deadline) {
  unsigned char hdr[4];
  bool eof = false;
  SPK_TRY(io(reinterpret_cast<char*>(hdr), 4, false, deadline, &eof));
  uint32_t n = hdr[0] | (hdr[1] << 8) | (hdr[2] << 16) | (static_cast<uint32_t>(hdr[3]) << 24);
  if (n > kMaxFrame)
    return make_error("bad frame: length " + std::to_string(n) + " exceeds the limit of " +
                      std::to_string(kMaxFrame));
  std::string out(n, '\0');
  SPK_TRY(io(out.data(), n, false, deadline, nullptr));
  return out;
}

std::string FrameSocket::local_host() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "127.0.0.1";
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
  else
    inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
  return buf;
}

static Result<addrinfo*> resolve(const HostPort& hp, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  if (passive) hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  std::string port = std::to_string(hp.port);
  int rc = ::getaddrinfo(hp.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0)
    return make_error("cannot resolve rendezvous host '" + hp.host + "': " + gai_strerror(rc),
                      "pass an IP address as master");
  return res;
}

Result<FrameSocket> connect_once(const HostPort& hp, Clock::time_point deadline) {
  SPK_ASSIGN(addrinfo * res, resolve(hp, false));
  std::string last = "no address";
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd pfd{fd, POLLOUT, 0};
      if (::poll(&pfd, 1, ms_left(deadline)) == 1) {
        int err = 0;
        socklen_t el = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
        rc = err == 0 ? 0 : -1;
        errno = err;
      } else {
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      ::freeaddrinfo(res);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return FrameSocket(fd);
    }
    last = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return make_error("cannot connect to " + hp.host + ":" + std::to_string(hp.port) + ": " + last, "", true);
}

Result<int> listen_on(const HostPort& hp, int* bound_port) {
  SPK_ASSIGN(addrinfo * res, resolve(hp, true));
  std::string last = "no address";
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      sockaddr_storage ss{};
      socklen_t len = sizeof ss;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
      *bound_port = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                                  : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
      ::freeaddrinfo(res);
      return fd;
    }
    last = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  return make_error("rank 0 cannot listen on " + hp.host + ":" + std::to_string(hp.port) + ": " + last,
                    "pick a free rendezvous port or stop the process holding it", true);
}

Result<FrameSocket> accept_until(int listen_fd, Clock::time_point deadline) {
  for (;;) {
    pollfd pfd{listen_fd, POLLIN, 0};
    int pr = ::poll(&pfd, 1, ms_left(deadline));
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) return make_error("timed out", "", true);
    int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return FrameSocket(fd);
  }
}

}  // namespace spk::rt::dist
