#include "orchestrator/node/host_probe.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "kernels/base/fs.h"

namespace spk {

Result<MemInfo> parse_meminfo(const std::string& text) {
  MemInfo m;
  bool have_avail = false, have_total = false;
  std::istringstream in(text);
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    if (!(ls >> key >> kb)) continue;
    if (key == "MemTotal:") m.total_bytes = kb * 1024, have_total = true;
    if (key == "MemAvailable:") m.available_bytes = kb * 1024, have_avail = true;
    if (key == "MemFree:") m.free_bytes = kb * 1024;
  }
  if (!have_avail || !have_total)
    return make_error("meminfo has no MemTotal/MemAvailable line", "needs Linux >= 3.14 (/proc/meminfo)");
  return m;
}

Result<MemInfo> read_meminfo(const std::string& path) {
  SPK_ASSIGN(std::string text, read_file(path));
  auto m = parse_meminfo(text);
  if (!m.ok()) return make_error(path + ": " + m.error().message, m.error().fix);
  return m;
}

Result<uint64_t> disk_free_bytes(const std::string& path) {
  std::filesystem::path p(path);
  std::error_code ec;
  while (!p.empty() && !std::filesystem::exists(p, ec) && p != p.root_path()) p = p.parent_path();
  if (p.empty()) p = ".";
  struct statvfs st {};
  if (::statvfs(p.c_str(), &st) != 0)
    return make_error("statvfs " + p.string() + ": " + std::strerror(errno), "check the path");
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

bool tcp_port_free(int port) {
  if (port <= 0 || port > 65535) return false;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && ::listen(fd, 1) == 0;
  ::close(fd);
  if (ok) return true;
  // Busy only if something listens: rows "sl local_address rem_address st ..." with st 0A = LISTEN.
  char want[8];
  std::snprintf(want, sizeof want, ":%04X", port);
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    auto text = read_file(table);
    if (!text) return false;  // cannot tell: say busy
    std::istringstream in(*text);
    std::string line, sl, local, remote, st;
    std::getline(in, line);
    while (in >> sl >> local >> remote >> st) {
      std::getline(in, line);
      if (st == "0A" && local.size() > 5 && local.compare(local.size() - 5, 5, want) == 0) return false;
    }
  }
  return true;
}

}  // namespace spk
