// The paged KV pool's bookkeeping: a fixed set of num_blocks blocks of block_size tokens, shared by all
// running sequences. A sequence owns a block table (ids into the pool); the model reads/writes exactly
// those blocks (runtime/model/step.h). Not thread-safe: the engine thread owns it.
//
// Automatic prefix caching (when enabled): a FULL block whose KV is written can be registered under its
// prefix key (runtime/serve/prefix_hash.h). A later sequence whose prompt starts with the same blocks
// takes references on them instead of recomputing them; cached blocks are read-only (the scheduler only
// ever writes past a sequence's num_computed, and registers a block only once it is full).
//
// Every block is in exactly one state:
//   referenced  ref count >= 1 (by one or more block tables); may hold a key
//   cached      ref count 0 and holds a key: free for allocation, but kept (LRU) until the pool needs it
//   empty       ref count 0, no key
// num_free() counts cached + empty. Allocation takes empty blocks first (lowest id: reproducible runs),
// then evicts the least recently released cached block (its key is forgotten).
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/serve/prefix_hash.h"

namespace spk::rt {

class BlockManager {
 public:
  BlockManager(int num_blocks, int block_size, bool enable_prefix_caching = false);

  [[nodiscard]] int num_blocks() const { return static_cast<int>(refs_.size()); }
  [[nodiscard]] int block_size() const { return block_size_; }
  [[nodiscard]] bool prefix_caching() const { return caching_; }
  [[nodiscard]] int num_free() const { return static_cast<int>(empty_.size() + lru_.size()); }
  [[nodiscard]] int num_cached() const { return static_cast<int>(by_key_.size()); }  // keyed, any refs
  [[nodiscard]] uint64_t num_evictions() const { return evictions_; }
  // Fraction of blocks referenced, 0..1 (the /metrics gauge; cached-but-unreferenced blocks are free).
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

  // The longest run of cached blocks for keys[0, max_blocks) whose own tokens (tokens[i*bs, (i+1)*bs))
  // also match: the blocks a new sequence can reuse. Takes no reference. Empty when caching is off.
  [[nodiscard]] std::vector<int32_t> find_cached(const std::vector<BlockHash>& keys,
                                                 const std::vector<int32_t>& tokens, int max_blocks) const;
  // Free blocks an admission with `hits` (from find_cached) covering `tokens` tokens consumes: the new
  // blocks plus the hits nobody references (they leave the free pool).
  [[nodiscard]] int admission_cost(const std::vector<int32_t>& hits, int tokens) const;
  // Admission: an empty `table` becomes hits + new blocks covering `tokens` tokens. All or nothing.
  bool allocate(std::vector<int32_t>& table, const std::vector<int32_t>& hits, int tokens);
  // Registers `block` (referenced, full, KV written) under `key`; `tokens` are its block_size token ids.
  // When another block already holds `key` this one stays private (both hold the same KV). No-op when
  // caching is off.
  void cache_block(int32_t block, const BlockHash& key, const int32_t* tokens);

  // Drops one reference to every block of `table` and clears it. Keyed blocks reaching zero stay cached
  // (the table's last block is the first evicted: a prefix outlives its continuations); the others
  // return to the empty pool.
  void release(std::vector<int32_t>& table);

  [[nodiscard]] int ref_count(int32_t block) const { return refs_.at(static_cast<size_t>(block)); }
  [[nodiscard]] bool is_cached(int32_t block) const { return keyed_.at(static_cast<size_t>(block)) != 0; }
  // Bookkeeping self-check (tests): every block in exactly one state, indexes consistent, and when
  // `tables` are all the live block tables, every ref count equals the number of table entries naming
  // the block. Empty string when consistent, else what is wrong.
  [[nodiscard]] std::string check(const std::vector<const std::vector<int32_t>*>* tables = nullptr) const;

 private:
  int32_t take_free();  // precondition: num_free() > 0
  void forget_key(int32_t block);

  int block_size_;
  bool caching_;
  std::vector<int> refs_;
  std::vector<int32_t> empty_;  // min-heap of empty ids
  // Cached (ref 0, keyed) blocks by release tick: begin() is the least recently released.
  std::set<std::pair<uint64_t, int32_t>> lru_;
  std::vector<uint64_t> tick_;   // per block: its key in lru_ while cached
  std::vector<uint8_t> keyed_;   // per block: holds a key
  std::vector<BlockHash> key_;   // per block, valid when keyed_
  std::vector<int32_t> tokens_;  // num_blocks x block_size: a keyed block's token ids (collision check)
  std::unordered_map<BlockHash, int32_t, BlockHashHasher> by_key_;
  uint64_t clock_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace spk::rt
