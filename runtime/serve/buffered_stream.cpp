#include "runtime/serve/buffered_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "runtime/serve/peer_socket.h"

namespace spk::rt {

namespace {

void ip_and_port(const sockaddr_storage& ss, std::string& ip, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    ::inet_ntop(AF_INET, &a->sin_addr, buf, sizeof buf);
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    ::inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof buf);
    port = ntohs(a->sin6_port);
  }
  ip = buf;
}

}  // namespace

bool BufferedStream::is_writable() const {
  pollfd p{fd_, POLLOUT, 0};
  return ::poll(&p, 1, timeout_ms_) > 0 && !(p.revents & (POLLERR | POLLHUP)) && !peer_hung_up(fd_);
}

ssize_t BufferedStream::read(char* ptr, size_t size) {
  const size_t n = std::min(size, in_.size() - pos_);
  std::memcpy(ptr, in_.data() + pos_, n);
  pos_ += n;
  return static_cast<ssize_t>(n);
}

ssize_t BufferedStream::write(const char* ptr, size_t size) {
  size_t off = 0;
  while (off < size) {
    const ssize_t n = ::send(fd_, ptr + off, size - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd_, POLLOUT, 0};
      if (::poll(&p, 1, timeout_ms_) > 0 && !(p.revents & (POLLERR | POLLHUP))) continue;
    }
    failed_ = true;
    return -1;
  }
  return static_cast<ssize_t>(size);
}

void BufferedStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) ip_and_port(ss, ip, port);
}

void BufferedStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) == 0) ip_and_port(ss, ip, port);
}

}  // namespace spk::rt
