#include "orchestrator/staging/push/wire.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace spk::staging::wire {

namespace {
std::string errno_text() { return std::strerror(errno); }
constexpr std::uint64_t kMaxJson = 64ull << 20;  // a manifest of 100k files fits easily

void tune(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}
}  // namespace

Conn::~Conn() {
  if (fd_ >= 0) ::close(fd_);
}

Conn& Conn::operator=(Conn&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    peer_ = std::move(o.peer_);
    o.fd_ = -1;
  }
  return *this;
}

void Conn::set_timeout(int seconds) {
  timeval tv{seconds, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

Status Conn::send_all(const void* p, std::size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::send(fd_, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      bool timeout = errno == EAGAIN || errno == EWOULDBLOCK;
      return make_error("send to " + peer_ + ": " + (timeout ? "peer stalled" : errno_text()),
                        "check the worker's stage-recv log; rerun to resume", true);
    }
    c += w;
    n -= static_cast<std::size_t>(w);
  }
  return ok_status();
}

Status Conn::recv_all(void* p, std::size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::recv(fd_, c, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) return make_error(peer_ + " closed the connection", "rerun to resume", true);
    if (r < 0) {
      bool timeout = errno == EAGAIN || errno == EWOULDBLOCK;
      return make_error("receive from " + peer_ + ": " + (timeout ? "peer silent too long" : errno_text()),
                        "rerun to resume", true);
    }
    c += r;
    n -= static_cast<std::size_t>(r);
  }
  return ok_status();
}

Status Conn::send_json(const nlohmann::json& j) {
  std::string s = j.dump();
  Header h;
  h.type = static_cast<std::uint8_t>(Type::json);
  h.len = s.size();
  SPK_TRY(send_all(&h, sizeof(h)));
  return send_all(s.data(), s.size());
}

Status Conn::send_block(std::uint32_t file, std::uint64_t block, std::uint64_t hash, const void* p,
                        std::size_t n) {
  Header h;
  h.type = static_cast<std::uint8_t>(Type::block);
  h.file = file;
  h.block = block;
  h.hash = hash;
  h.len = n;
  SPK_TRY(send_all(&h, sizeof(h)));
  return send_all(p, n);
}

Status Conn::send_end() {
  Header h;
  h.type = static_cast<std::uint8_t>(Type::end);
  return send_all(&h, sizeof(h));
}

Result<Header> Conn::recv_header() {
  Header h;
  SPK_TRY(recv_all(&h, sizeof(h)));
  if (h.type < 1 || h.type > 3)
    return make_error(peer_ + " sent message type " + std::to_string(h.type) + ": not the push protocol",
                      "make sure both ends run the same sparkctl version");
  return h;
}

Result<nlohmann::json> Conn::recv_json(const char* expect) {
  SPK_ASSIGN(Header h, recv_header());
  if (h.type != static_cast<std::uint8_t>(Type::json) || h.len > kMaxJson)
    return make_error(
        peer_ + " sent a non-JSON message where '" + std::string(expect ? expect : "json") + "' was due",
        "make sure both ends run the same sparkctl version");
  std::string s(h.len, '\0');
  SPK_TRY(recv_all(s.data(), s.size()));
  auto j = nlohmann::json::parse(s, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return make_error(peer_ + " sent malformed JSON for '" + std::string(expect ? expect : "json") + "'",
                      "make sure both ends run the same sparkctl version");
  // json::value() throws on a key of another type: read strings only as strings.
  auto str = [&](const char* k, const std::string& def) {
    const auto it = j.find(k);
    return it != j.end() && it->is_string() ? it->get<std::string>() : def;
  };
  if (j.contains("error")) return make_error(peer_ + ": " + str("error", j["error"].dump()), str("fix", ""));
  if (expect != nullptr && str("type", "") != expect)
    return make_error(peer_ + " sent '" + str("type", "?") + "' where '" + std::string(expect) + "' was due",
                      "make sure both ends run the same sparkctl version");
  return j;
}

Result<int> listen_tcp(const std::string& bind, int& port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, bind.c_str(), &a.sin_addr) != 1)
    return make_error("bind address '" + bind + "' is not an IPv4 address", "pass the node's fabric IP");
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error("socket: " + errno_text());
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || ::listen(fd, 64) != 0) {
    std::string e = errno_text();
    ::close(fd);
    return make_error("listen on " + bind + ":" + std::to_string(port) + ": " + e,
                      "pick another staging port (--port)", true);
  }
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return fd;
}

Result<Conn> accept_tcp(int lfd, std::chrono::milliseconds timeout) {
  pollfd p{lfd, POLLIN, 0};
  int r;
  do r = ::poll(&p, 1, static_cast<int>(timeout.count()));
  while (r < 0 && errno == EINTR);
  if (r == 0)
    return make_error("no sender connected within " + std::to_string(timeout.count() / 1000) + " s",
                      "start the push from the head, or raise idle_timeout_s", true);
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  int fd = ::accept4(lfd, reinterpret_cast<sockaddr*>(&a), &len, SOCK_CLOEXEC);
  if (fd < 0) return make_error("accept: " + errno_text(), "", true);
  tune(fd);
  char ip[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
  return Conn(fd, std::string(ip) + ":" + std::to_string(ntohs(a.sin_port)));
}

Result<Conn> connect_tcp(const std::string& host, int port, std::chrono::milliseconds timeout,
                         const std::function<bool()>& give_up) {
  const std::string peer = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int e = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); e != 0)
    return make_error("cannot resolve " + host + ": " + ::gai_strerror(e), "check the node's fabric address");
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  for (;;) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
      ::freeaddrinfo(res);
      tune(fd);
      return Conn(fd, peer);
    }
    last = errno_text();
    if (fd >= 0) ::close(fd);
    if (std::chrono::steady_clock::now() >= deadline || (give_up && give_up())) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::freeaddrinfo(res);
  return make_error("cannot connect to stage-recv at " + peer + ": " + last,
                    "is `sparkctl node stage-recv` running there and the port open?", true);
}

nlohmann::json error_json(const Error& e) { return {{"error", e.message}, {"fix", e.fix}}; }

}  // namespace spk::staging::wire
