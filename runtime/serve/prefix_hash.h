// Automatic prefix caching's block key: a hash chain over FULL KV blocks. Block i of a sequence is keyed
// by hash(key of block i-1, token ids of block i), so equal keys mean equal whole prefixes (not just equal
// block contents). XXH3-128: a false match needs a 128-bit collision; the block manager also compares the
// block's own token ids, so a collision could only ever alias two prefixes that end in the same block.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spk::rt {

struct BlockHash {
  uint64_t lo = 0, hi = 0;
  friend bool operator==(const BlockHash& a, const BlockHash& b) { return a.lo == b.lo && a.hi == b.hi; }
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const {
    return static_cast<size_t>(h.lo ^ (h.hi * 0x9e3779b97f4a7c15ull));
  }
};

// The key of a block holding tokens[0, n) whose predecessor has key `parent` ({} for the first block).
[[nodiscard]] BlockHash hash_block(const BlockHash& parent, const int32_t* tokens, int n);

// Extends `hashes` (keys of blocks 0, 1, ... of `tokens`) to every full block inside tokens[0, upto).
// Already present keys are kept: tokens before `upto` never change for a sequence.
void extend_block_hashes(std::vector<BlockHash>& hashes, const std::vector<int32_t>& tokens, int upto,
                         int block_size);

}  // namespace spk::rt
