// Safetensors writer. The file is sized up front (posix_fallocate, so a full disk is an error, not a
// SIGBUS), mmapped shared, and each tensor is filled in place: no user buffer, so an 8B checkpoint
// streams through the page cache. Tensors are contiguous (the reference reader rejects holes) and the
// header is space-padded so the data section starts 8-byte aligned. Temp file + fsync + rename.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kernels/base/fs.h"
#include "runtime/checkpoint/safetensors.h"

namespace spk::rt {

namespace {

std::string errno_text(int e) { return std::strerror(e); }

Status fsync_dir_of(const std::string& path) {
  const auto dir = std::filesystem::path(path).parent_path();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return ok_status();
}

Result<uint64_t> spec_bytes(const TensorSpec& t) {
  uint64_t n = dtype_size(t.dtype);
  for (int64_t d : t.shape) {
    if (d < 0) return make_error("tensor '" + t.name + "': negative dimension " + std::to_string(d));
    const auto ud = static_cast<uint64_t>(d);
    if (ud != 0 && n > UINT64_MAX / ud) return make_error("tensor '" + t.name + "': size overflows 64 bits");
    n *= ud;
  }
  return n;
}

}  // namespace

Status write_safetensors(const std::string& path, const std::vector<TensorSpec>& tensors, const FillFn& fill,
                         const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& m = h["__metadata__"];
    m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
  }
  std::vector<uint64_t> sizes;
  uint64_t off = 0;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || h.contains(t.name))
      return make_error(path + ": bad or duplicate tensor name '" + t.name + "'",
                        "give each tensor a unique name");
    SPK_ASSIGN(uint64_t n, spec_bytes(t));
    sizes.push_back(n);
    h[t.name] = {
        {"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {off, off + n}}};
    off += n;
  }
  std::string header = h.dump();
  header.append((8 - (8 + header.size()) % 8) % 8, ' ');
  const uint64_t total = 8 + header.size() + off;

  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return make_error("cannot create " + tmp + ": " + errno_text(errno),
                      "check the directory exists and is writable");
  auto fail = [&](const std::string& what, int e) -> Status {
    ::close(fd);
    ::unlink(tmp.c_str());
    return make_error(what + " " + tmp + ": " + errno_text(e),
                      e == ENOSPC ? "free disk space or pick another --out" : "");
  };
  if (int e = ::posix_fallocate(fd, 0, static_cast<off_t>(total)); e != 0)
    return fail("cannot allocate " + std::to_string(total) + " bytes for", e);
  void* m = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return fail("cannot mmap", errno);
  auto* base = static_cast<uint8_t*>(m);
  const uint64_t hn = header.size();
  for (int i = 0; i < 8; ++i) base[i] = static_cast<uint8_t>(hn >> (8 * i));
  std::memcpy(base + 8, header.data(), hn);
  uint8_t* data = base + 8 + hn;
  uint64_t pos = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    fill(tensors[i], data + pos, sizes[i]);
    pos += sizes[i];
  }
  if (::msync(m, total, MS_SYNC) != 0) {
    int e = errno;
    ::munmap(m, total);
    return fail("cannot msync", e);
  }
  ::munmap(m, total);
  if (::fsync(fd) != 0) return fail("cannot fsync", errno);
  if (::close(fd) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return make_error("cannot close " + tmp + ": " + errno_text(e));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return make_error("cannot rename " + tmp + " to " + path + ": " + errno_text(e));
  }
  return fsync_dir_of(path);
}

Status write_checkpoint_shards(const std::string& dir, const std::vector<TensorSpec>& tensors,
                               const FillFn& fill, uint64_t max_shard_bytes) {
  // Greedy split in the given order; a tensor larger than the cap gets a shard of its own.
  std::vector<std::vector<TensorSpec>> shards(1);
  std::vector<uint64_t> shard_bytes(1, 0);
  uint64_t total = 0;
  for (const auto& t : tensors) {
    SPK_ASSIGN(uint64_t n, spec_bytes(t));
    if (!shards.back().empty() && shard_bytes.back() + n > max_shard_bytes) {
      shards.emplace_back();
      shard_bytes.push_back(0);
    }
    shards.back().push_back(t);
    shard_bytes.back() += n;
    total += n;
  }
  const std::map<std::string, std::string> meta{{"format", "pt"}};
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error("cannot create " + dir + ": " + ec.message(), "check --out is writable");
  const std::string single = dir + "/model.safetensors";
  const std::string index = dir + "/model.safetensors.index.json";
  if (shards.size() == 1) {
    fs::remove(index, ec);  // a stale index must not shadow the new file
    return write_safetensors(single, shards[0], fill, meta);
  }
  fs::remove(single, ec);  // readers prefer model.safetensors, so a stale one would win
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  const size_t k = shards.size();
  for (size_t i = 0; i < k; ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, k);
    SPK_TRY(write_safetensors(dir + "/" + name, shards[i], fill, meta));
    for (const auto& t : shards[i]) weight_map[t.name] = name;
  }
  nlohmann::ordered_json idx = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  return write_file_atomic(index, idx.dump(2) + "\n");
}

}  // namespace spk::rt
