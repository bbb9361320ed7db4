// Don't-fragment ping: one ICMP echo whose IP packet is exactly `mtu` bytes (payload mtu-28: 20 IP +
// 8 ICMP header) with IP_MTU_DISCOVER = IP_PMTUDISC_DO. A reply proves every hop passes `mtu`; a
// smaller MTU on the far side drops the frame (no reply), a smaller local MTU fails at send (EMSGSIZE).
// Uses an unprivileged ICMP socket when net.ipv4.ping_group_range allows, else a raw one (root).
#pragma once

#include <string>

#include "kernels/base/status.h"

namespace spk::fabric {

struct PingRequest {
  std::string peer;  // IPv4
  int mtu = 9000;
  int attempts = 3;       // echoes sent; success on the first reply
  int timeout_ms = 1000;  // per attempt
};

// Round-trip time in ms, or an error naming the peer, the size and what happened, with the fix.
Result<double> df_ping(const PingRequest& req);

}  // namespace spk::fabric
