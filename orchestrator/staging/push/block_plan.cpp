#include "orchestrator/staging/push/block_plan.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

namespace spk::staging {

Result<std::vector<std::uint64_t>> block_hashes(const std::string& path, std::uint64_t block_bytes) {
  if (block_bytes == 0) return make_error("block size 0 for " + path, "pass a block size > 0");
  std::vector<std::uint64_t> out;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return out;
    return make_error("cannot open " + path + ": " + std::strerror(errno), "check permissions");
  }
  std::vector<char> buf(block_bytes);
  for (;;) {
    std::uint64_t got = 0;
    while (got < block_bytes) {
      ssize_t n = ::read(fd, buf.data() + got, block_bytes - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        std::string e = std::strerror(errno);
        ::close(fd);
        return make_error("read " + path + ": " + e, "check the disk");
      }
      if (n == 0) break;
      got += static_cast<std::uint64_t>(n);
    }
    if (got == 0) break;
    out.push_back(XXH64(buf.data(), got, 0));
    if (got < block_bytes) break;
  }
  ::close(fd);
  return out;
}

Result<std::vector<std::vector<std::uint64_t>>> block_hashes_many(const std::vector<std::string>& paths,
                                                                  std::uint64_t block_bytes, int threads) {
  std::vector<std::vector<std::uint64_t>> out(paths.size());
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  std::optional<Error> err;
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, threads); ++t)
    pool.emplace_back([&] {
      for (std::size_t i; (i = next++) < paths.size();) {
        if (paths[i].empty()) continue;
        auto h = block_hashes(paths[i], block_bytes);
        std::lock_guard<std::mutex> l(mu);
        if (h.ok())
          out[i] = std::move(*h);
        else if (!err)
          err = h.error();
      }
    });
  for (auto& t : pool) t.join();
  if (err) return *err;
  return out;
}

std::vector<std::uint64_t> blocks_to_send(const std::vector<std::uint64_t>& want,
                                          const std::vector<std::uint64_t>& have) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t i = 0; i < want.size(); ++i)
    if (i >= have.size() || have[i] != want[i]) out.push_back(i);
  return out;
}

Result<std::string> safe_join(const std::string& root, const std::string& rel) {
  const std::string fix = "send a relative path without '..' that stays under " + root;
  if (rel.empty() || rel.front() == '/')
    return make_error("refused path '" + rel + "': empty or absolute", fix);
  std::string cur = root;
  std::stringstream ss(rel);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (part.empty() || part == "." || part == "..")
      return make_error("refused path '" + rel + "': component '" + part + "'", fix);
    cur += "/" + part;
    struct stat st {};
    if (::lstat(cur.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
      return make_error("refused path '" + rel + "': " + cur + " is a symlink", fix);
  }
  return cur;
}

}  // namespace spk::staging
