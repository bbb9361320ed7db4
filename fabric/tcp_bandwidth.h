// TCP bandwidth between two sparkctl processes (or threads): the client streams up to `max_bytes` or
// `max_seconds`, whichever comes first, then half-closes; the server counts what arrived and answers
// the 8-byte count, so the number is bytes the peer really received. Napkin math: one TCP stream on a
// 100G half reaches ~30-50 Gbit/s; a result far below 10 on the fabric means the wrong netdev or MTU.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "kernels/base/status.h"

namespace spk::fabric {

inline constexpr int kDefaultBwPort = 29610;

struct BwResult {
  std::string peer;
  uint64_t bytes = 0;  // acknowledged by the server
  double seconds = 0;
  double gbit_per_s = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(BwResult, peer, bytes, seconds, gbit_per_s)

class BwServer {
 public:
  // Binds and listens (port 0 = any free port, see port()).
  static Result<BwServer> listen(const std::string& bind_ip, int port);
  BwServer(BwServer&& o) noexcept : fd_(o.fd_), port_(o.port_) { o.fd_ = -1; }
  BwServer& operator=(BwServer&&) = delete;
  ~BwServer();
  [[nodiscard]] int port() const { return port_; }
  // Serves `connections` clients one after another; waits at most `accept_timeout_s` for each.
  Result<uint64_t> serve(int connections, int accept_timeout_s);

 private:
  BwServer(int fd, int port) : fd_(fd), port_(port) {}
  int fd_ = -1;
  int port_ = 0;
};

Result<BwResult> bw_client(const std::string& peer, int port, uint64_t max_bytes = 1ull << 30,
                           double max_seconds = 2.0);

}  // namespace spk::fabric
