#include "orchestrator/staging/push/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace spk::staging {

namespace {
Error io_error(const std::string& what, const std::string& path) {
  if (errno == ENOSPC || errno == EDQUOT)
    return make_error("disk full (ENOSPC) while " + what + " " + path,
                      "free space on that disk or point cache_dir at a larger one");
  return make_error(what + " " + path + ": " + std::strerror(errno), "check the disk and permissions");
}
}  // namespace

Status pwrite_all(int fd, const void* p, std::uint64_t n, std::uint64_t off, const std::string& path) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::pwrite(fd, c, n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return io_error("writing", path);
    c += w;
    n -= static_cast<std::uint64_t>(w);
    off += static_cast<std::uint64_t>(w);
  }
  return ok_status();
}

Status reserve(int fd, std::uint64_t size, const std::string& path) {
  if (size == 0) return ok_status();
  int e = ::posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (e == 0 || e == EOPNOTSUPP || e == EINVAL) return ok_status();
  errno = e;
  return io_error("reserving space for", path);
}

Status copy_file(const std::string& from, const std::string& to) {
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) return io_error("opening", from);
  int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (out < 0) {
    Error err = io_error("creating", to);
    ::close(in);
    return err;
  }
  Status st;
  for (;;) {
    ssize_t n = ::copy_file_range(in, nullptr, out, nullptr, 64 << 20, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      st = io_error("copying " + from + " to", to);
      break;
    }
    if (n == 0) break;
  }
  ::close(in);
  ::close(out);
  if (!st.ok()) ::unlink(to.c_str());
  return st;
}

Status fsync_parent(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error("opening directory", dir);
  int r = ::fsync(fd);
  ::close(fd);
  if (r != 0) return io_error("fsync of directory", dir);
  return ok_status();
}

bool is_disk_full(const Error& e) { return e.message.find("ENOSPC") != std::string::npos; }

std::string human_bytes(std::uint64_t n) {
  char buf[32];
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

}  // namespace spk::staging
