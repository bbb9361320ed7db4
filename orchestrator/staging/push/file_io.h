// File helpers of the receiver (internal to staging/push): positional writes, space reservation, copy,
// directory fsync. Disk-full errors carry "ENOSPC" so callers can tell them apart (is_disk_full).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/base/status.h"

namespace spk::staging {

Status pwrite_all(int fd, const void* p, std::uint64_t n, std::uint64_t off, const std::string& path);
// fallocate(0..size) so a full disk shows before the first block; a filesystem without it is fine.
Status reserve(int fd, std::uint64_t size, const std::string& path);
// `from` copied to `to` (copy_file_range: a reflink or in-kernel copy where the filesystem can).
Status copy_file(const std::string& from, const std::string& to);
Status fsync_parent(const std::string& path);
bool is_disk_full(const Error& e);
// "1.50 GiB", "12.0 MiB", "512 B".
std::string human_bytes(std::uint64_t n);

}  // namespace spk::staging
