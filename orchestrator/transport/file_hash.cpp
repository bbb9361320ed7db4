#include "orchestrator/transport/file_hash.h"

#define XXH_INLINE_ALL  // header-only: no link dependency on libxxhash
#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace spk {

namespace {
std::string hex64(XXH64_hash_t h) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}
}  // namespace

Result<std::string> file_xxh3_hex(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error("cannot open " + path + ": " + std::strerror(errno), "check the path");
  std::unique_ptr<XXH3_state_t, decltype(&XXH3_freeState)> st(XXH3_createState(), XXH3_freeState);
  XXH3_64bits_reset(st.get());
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return make_error("cannot read " + path + ": " + std::strerror(e), "check the file");
    }
    if (n == 0) break;
    XXH3_64bits_update(st.get(), buf.data(), static_cast<size_t>(n));
  }
  ::close(fd);
  return hex64(XXH3_64bits_digest(st.get()));
}

std::string bytes_xxh3_hex(std::string_view bytes) { return hex64(XXH3_64bits(bytes.data(), bytes.size())); }

}  // namespace spk
