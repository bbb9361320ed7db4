#include "orchestrator/staging/push/file_io.h"

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

int pwrite_errno(int fd, const void* p, std::uint64_t n, std::uint64_t off) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::pwrite(fd, c, n, static_cast<off_t>(off));
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    if (w == 0) return EIO;
    c += w;
    n -= static_cast<std::uint64_t>(w);
    off += static_cast<std::uint64_t>(w);
  }
  return 0;
}

Error write_error(int err, const std::string& path) {
  errno = err;
  return io_error("writing", path);
}

Status pwrite_all(int fd, const void* p, std::uint64_t n, std::uint64_t off, const std::string& path) {
  if (int e = pwrite_errno(fd, p, n, off); e != 0) return write_error(e, path);
  return ok_status();
}

std::uint32_t direct_io_align(int fd) {
#ifdef STATX_DIOALIGN
  struct statx sx {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) != 0 || !(sx.stx_mask & STATX_DIOALIGN) ||
      sx.stx_dio_offset_align == 0)
    return 0;
  return std::max(sx.stx_dio_offset_align, sx.stx_dio_mem_align);
#else
  (void)fd;
  return 0;
#endif
}

Status reserve(int fd, std::uint64_t size, const std::string& path) {
  if (size == 0) return ok_status();
  int e = ::posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (e == 0 || e == EOPNOTSUPP || e == EINVAL) return ok_status();
  errno = e;
  return io_error("reserving space for", path);
}

bool clone_file(const std::string& from, int to_fd) {
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0) return false;
  bool ok = ::ioctl(to_fd, FICLONE, in) == 0;
  ::close(in);
  return ok;
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
