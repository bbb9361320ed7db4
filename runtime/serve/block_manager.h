// The paged KV pool's bookkeeping: a fixed set of num_blocks blocks of block_size tokens, shared by all
// running sequences. A sequence owns a block table (ids into the pool); the model reads/writes exactly
// those blocks (runtime/model/step.h). Free list + ref counts; every block is either free or has
// ref count >= 1. Not thread-safe: the engine thread owns it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spk::rt {

class BlockManager {
 public:
  BlockManager(int num_blocks, int block_size);

  [[nodiscard]] int num_blocks() const { return static_cast<int>(refs_.size()); }
  [[nodiscard]] int block_size() const { return block_size_; }
  [[nodiscard]] int num_free() const { return static_cast<int>(free_.size()); }
  // Fraction of blocks in use, 0..1 (the /metrics gauge).
  [[nodiscard]] double usage() const;

  // Blocks needed to hold `tokens` tokens.
  [[nodiscard]] int blocks_for(int tokens) const { return (tokens + block_size_ - 1) / block_size_; }
  // Extra blocks `table` needs to cover `tokens` tokens (0 when it already does).
  [[nodiscard]] int blocks_missing(const std::vector<int32_t>& table, int tokens) const;
  [[nodiscard]] bool can_grow(const std::vector<int32_t>& table, int tokens) const {
    return blocks_missing(table, tokens) <= num_free();
  }
  // Appends blocks so that `table` covers `tokens` tokens. All or nothing: false and `table` unchanged
  // when the pool has too few free blocks.
  bool grow(std::vector<int32_t>& table, int tokens);
  // Drops one reference to every block of `table` (blocks reaching zero return to the free list) and
  // clears it. Lowest free ids are handed out first, so allocation is deterministic.
  void release(std::vector<int32_t>& table);

  [[nodiscard]] int ref_count(int32_t block) const { return refs_.at(static_cast<size_t>(block)); }

 private:
  int block_size_;
  std::vector<int> refs_;
  std::vector<int32_t> free_;  // min-heap of free ids
};

}  // namespace spk::rt
