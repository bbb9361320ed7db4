// File helpers of the receiver (internal to staging/push): positional writes, space reservation, clone,
// directory fsync. Disk-full errors carry "ENOSPC" so callers can tell them apart (is_disk_full).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/base/status.h"

namespace spk::staging {

Status pwrite_all(int fd, const void* p, std::uint64_t n, std::uint64_t off, const std::string& path);
// pwrite_all that answers 0 or the errno (EINVAL from an O_DIRECT fd = alignment refused).
int pwrite_errno(int fd, const void* p, std::uint64_t n, std::uint64_t off);
// The error pwrite_all gives for `err` (an errno) while writing `path`.
Error write_error(int err, const std::string& path);
// Offset/length/memory alignment O_DIRECT needs on the open file `fd` (statx STATX_DIOALIGN, Linux 6.1+),
// or 0 when the filesystem does not say or does not support direct I/O (then: page cache only).
std::uint32_t direct_io_align(int fd);
// fallocate(0..size) so a full disk shows before the first block; a filesystem without it is fine.
Status reserve(int fd, std::uint64_t size, const std::string& path);
// `to_fd` becomes a reflink clone of `from` (FICLONE: btrfs, XFS, ...); false where the filesystem cannot.
bool clone_file(const std::string& from, int to_fd);
Status fsync_parent(const std::string& path);
bool is_disk_full(const Error& e);
// "1.50 GiB", "12.0 MiB", "512 B".
std::string human_bytes(std::uint64_t n);

}  // namespace spk::staging
