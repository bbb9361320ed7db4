// The transport-independent core of the push: block hashes of a file, which blocks differ, and the
// path check every received name passes. Pure functions over the filesystem; no sockets.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace spk::staging {

// xxhash64 of each `block_bytes` block of `path` (last block short). A missing file gives an empty list.
// Cost: one sequential read, ~10 GB/s hashing, so disk-bound.
Result<std::vector<std::uint64_t>> block_hashes(const std::string& path, std::uint64_t block_bytes);

// block_hashes of each path ("" = skipped, empty list) on `threads` threads: a multi-shard tree hashes
// at the speed of all cores. The first error wins.
Result<std::vector<std::vector<std::uint64_t>>> block_hashes_many(const std::vector<std::string>& paths,
                                                                  std::uint64_t block_bytes, int threads);

// Indices of blocks the sender must send so the destination (hashes `have`) equals the source
// (hashes `want`): every index where they differ or `have` has no block.
std::vector<std::uint64_t> blocks_to_send(const std::vector<std::uint64_t>& want,
                                          const std::vector<std::uint64_t>& have);

// `rel` joined under `root`, or an error when it is absolute, empty, has a `..` or `.` component, or
// an existing prefix of it is a symlink (escape). The error names the path.
Result<std::string> safe_join(const std::string& root, const std::string& rel);

}  // namespace spk::staging
