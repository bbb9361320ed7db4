// Internal: blocking TCP with length-prefixed frames, bounded lengths and deadlines.
// Frame: u32 little-endian length, then that many bytes; lengths above kMaxFrame are refused
// (peers are untrusted). Every call takes a deadline so nothing blocks forever.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "kernels/base/status.h"

namespace spk::rt::dist {

inline constexpr uint32_t kMaxFrame = 64u << 20;  // 64 MiB: a step plan or a store value, never more

using Clock = std::chrono::steady_clock;

struct HostPort {
  std::string host;
  int port = 0;
};
Result<HostPort> parse_host_port(const std::string& s);

class FrameSocket {
 public:
  FrameSocket() = default;
  explicit FrameSocket(int fd) : fd_(fd) {}
  FrameSocket(FrameSocket&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  FrameSocket& operator=(FrameSocket&& o) noexcept;
  ~FrameSocket() { close(); }

  [[nodiscard]] int fd() const { return fd_; }
  [[nodiscard]] bool valid() const { return fd_ >= 0; }
  void close();
  void shutdown();  // wakes a blocked reader in another thread

  Status send(const std::string& payload, Clock::time_point deadline);
  // Error "closed" (message starts with "eof") on an orderly close before a frame starts.
  Result<std::string> recv(Clock::time_point deadline);
  // The local address this socket is bound to (what peers can reach us on).
  [[nodiscard]] std::string local_host() const;

 private:
  Status io(char* p, size_t n, bool write, Clock::time_point deadline, bool* eof_at_start);
  int fd_ = -1;
};

// One attempt; the error is retryable when nobody listens yet.
Result<FrameSocket> connect_once(const HostPort& hp, Clock::time_point deadline);
// Listening socket on hp (port 0: any); returns fd and the bound port.
Result<int> listen_on(const HostPort& hp, int* bound_port);
// Accepts one connection or times out (retryable error).
Result<FrameSocket> accept_until(int listen_fd, Clock::time_point deadline);

}  // namespace spk::rt::dist
