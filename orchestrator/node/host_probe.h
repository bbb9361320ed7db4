// Small read-only probes of the node's host: memory, disk, ports. Each names the path or value it read.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/base/status.h"

namespace spk {

struct MemInfo {
  uint64_t total_bytes = 0;
  uint64_t available_bytes = 0;  // MemAvailable: what can be allocated without swapping (not MemFree)
  uint64_t free_bytes = 0;       // MemFree, reported for contrast only
};

// Parses /proc/meminfo-format text ("MemAvailable:   123 kB").
Result<MemInfo> parse_meminfo(const std::string& text);
Result<MemInfo> read_meminfo(const std::string& path = "/proc/meminfo");

// Bytes available to an unprivileged writer on the filesystem holding `path` (statvfs f_bavail).
// A path that does not exist yet is measured at its nearest existing parent.
Result<uint64_t> disk_free_bytes(const std::string& path);

// True when a TCP listener can bind `port` on 0.0.0.0 right now, or when the bind is refused only because
// of leftover connections (TIME_WAIT of a stopped server that used SO_REUSEPORT, as cpp-httplib does): no
// socket LISTENs on the port in /proc/net/tcp{,6}.
bool tcp_port_free(int port);

}  // namespace spk
