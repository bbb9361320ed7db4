#include "runtime/serve/block_manager.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace spk::rt {

BlockManager::BlockManager(int num_blocks, int block_size, bool enable_prefix_caching)
    : block_size_(block_size),
      caching_(enable_prefix_caching),
      refs_(static_cast<size_t>(std::max(num_blocks, 0)), 0),
      tick_(refs_.size(), 0),
      keyed_(refs_.size(), 0),
      key_(caching_ ? refs_.size() : 0),
      tokens_(caching_ ? refs_.size() * static_cast<size_t>(block_size) : 0) {
  assert(block_size > 0);
  empty_.reserve(refs_.size());
  for (int b = 0; b < num_blocks; ++b) empty_.push_back(b);  // sorted ascending = a valid min-heap
}

double BlockManager::usage() const {
  if (refs_.empty()) return 0.0;
  return 1.0 - static_cast<double>(num_free()) / static_cast<double>(refs_.size());
}

int BlockManager::blocks_missing(const std::vector<int32_t>& table, int tokens) const {
  return std::max(0, blocks_for(tokens) - static_cast<int>(table.size()));
}

void BlockManager::forget_key(int32_t b) {
  const size_t i = static_cast<size_t>(b);
  if (!keyed_[i]) return;
  auto it = by_key_.find(key_[i]);
  if (it != by_key_.end() && it->second == b) by_key_.erase(it);
  keyed_[i] = 0;
}

int32_t BlockManager::take_free() {
  int32_t b;
  if (!empty_.empty()) {
    std::pop_heap(empty_.begin(), empty_.end(), std::greater<>());  // lowest id first: reproducible runs
    b = empty_.back();
    empty_.pop_back();
  } else {
    auto it = lru_.begin();  // evict the least recently released cached block
    b = it->second;
    lru_.erase(it);
    forget_key(b);
    ++evictions_;
  }
  refs_[static_cast<size_t>(b)] = 1;
  return b;
}

bool BlockManager::grow(std::vector<int32_t>& table, int tokens) {
  int need = blocks_missing(table, tokens);
  if (need > num_free()) return false;
  for (int i = 0; i < need; ++i) table.push_back(take_free());
  return true;
}

std::vector<int32_t> BlockManager::find_cached(const std::vector<BlockHash>& keys,
                                               const std::vector<int32_t>& tokens, int max_blocks) const {
  std::vector<int32_t> hits;
  if (!caching_) return hits;
  const int n =
      std::min({max_blocks, static_cast<int>(keys.size()), static_cast<int>(tokens.size()) / block_size_});
  const size_t bs = static_cast<size_t>(block_size_);
  for (int i = 0; i < n; ++i) {
    auto it = by_key_.find(keys[static_cast<size_t>(i)]);
    if (it == by_key_.end()) break;
    const int32_t b = it->second;
    if (std::memcmp(tokens_.data() + static_cast<size_t>(b) * bs, tokens.data() + static_cast<size_t>(i) * bs,
                    bs * sizeof(int32_t)) != 0)
      break;  // a 128-bit collision: never reuse KV of other tokens
    hits.push_back(b);
  }
  return hits;
}

int BlockManager::admission_cost(const std::vector<int32_t>& hits, int tokens) const {
  int revived = 0;
  for (int32_t b : hits)
    if (refs_.at(static_cast<size_t>(b)) == 0) ++revived;
  return revived + std::max(0, blocks_for(tokens) - static_cast<int>(hits.size()));
}

bool BlockManager::allocate(std::vector<int32_t>& table, const std::vector<int32_t>& hits, int tokens) {
  assert(table.empty() && "allocate is for an admission; use grow on a running table");
  if (!table.empty() || admission_cost(hits, tokens) > num_free()) return false;
  // References first, so that the new blocks below can never evict one of the hits.
  for (int32_t b : hits) {
    int& r = refs_.at(static_cast<size_t>(b));
    if (r == 0) lru_.erase({tick_[static_cast<size_t>(b)], b});
    ++r;
    table.push_back(b);
  }
  return grow(table, tokens);
}

void BlockManager::cache_block(int32_t block, const BlockHash& key, const int32_t* tokens) {
  if (!caching_) return;
  const size_t i = static_cast<size_t>(block);
  assert(refs_.at(i) > 0 && "only a referenced, written block can be cached");
  if (keyed_[i] || by_key_.count(key)) return;  // already keyed, or an equal block holds the key
  keyed_[i] = 1;
  key_[i] = key;
  std::memcpy(tokens_.data() + i * static_cast<size_t>(block_size_), tokens,
              static_cast<size_t>(block_size_) * sizeof(int32_t));
  by_key_.emplace(key, block);
}

void BlockManager::release(std::vector<int32_t>& table) {
  // Back to front: the table's last block gets the oldest tick and is evicted first.
  for (auto it = table.rbegin(); it != table.rend(); ++it) {
    const int32_t b = *it;
    int& r = refs_.at(static_cast<size_t>(b));
    assert(r > 0 && "block released twice: scheduler bug");
    if (r <= 0) continue;  // never put a block in the free pool twice
    if (--r > 0) continue;
    if (keyed_[static_cast<size_t>(b)]) {
      tick_[static_cast<size_t>(b)] = ++clock_;
      lru_.insert({clock_, b});
    } else {
      empty_.push_back(b);
      std::push_heap(empty_.begin(), empty_.end(), std::greater<>());
    }
  }
  table.clear();
}

std::string BlockManager::check(const std::vector<const std::vector<int32_t>*>* tables) const {
  const size_t n = refs_.size();
  std::vector<int> in_empty(n, 0), in_lru(n, 0);
  for (int32_t b : empty_) {
    if (b < 0 || static_cast<size_t>(b) >= n) return "empty pool holds bad id " + std::to_string(b);
    ++in_empty[static_cast<size_t>(b)];
  }
  for (const auto& [t, b] : lru_) {
    if (b < 0 || static_cast<size_t>(b) >= n) return "LRU holds bad id " + std::to_string(b);
    if (tick_[static_cast<size_t>(b)] != t) return "block " + std::to_string(b) + " has a stale LRU tick";
    ++in_lru[static_cast<size_t>(b)];
  }
  for (size_t i = 0; i < n; ++i) {
    const std::string id = "block " + std::to_string(i);
    if (refs_[i] < 0) return id + " has ref count " + std::to_string(refs_[i]);
    if (in_empty[i] + in_lru[i] > 1) return id + " is free twice";
    if (refs_[i] > 0 && in_empty[i] + in_lru[i] > 0) return id + " is both free and referenced";
    if (refs_[i] == 0 && in_empty[i] + in_lru[i] == 0) return id + " is unreferenced but not free";
    if (in_empty[i] && keyed_[i]) return id + " is empty but keyed";
    if (in_lru[i] && !keyed_[i]) return id + " is cached without a key";
    if (keyed_[i]) {
      auto it = by_key_.find(key_[i]);
      if (it == by_key_.end() || it->second != static_cast<int32_t>(i)) return id + " key is not indexed";
    }
  }
  for (const auto& [k, b] : by_key_)
    if (b < 0 || static_cast<size_t>(b) >= n || !keyed_[static_cast<size_t>(b)] ||
        !(key_[static_cast<size_t>(b)] == k))
      return "key index names block " + std::to_string(b) + " which does not hold that key";
  if (tables) {
    std::vector<int> want(n, 0);
    for (const auto* t : *tables)
      for (int32_t b : *t) {
        if (b < 0 || static_cast<size_t>(b) >= n) return "a block table holds bad id " + std::to_string(b);
        ++want[static_cast<size_t>(b)];
      }
    for (size_t i = 0; i < n; ++i)
      if (want[i] != refs_[i])
        return "block " + std::to_string(i) + " has ref count " + std::to_string(refs_[i]) + " but " +
               std::to_string(want[i]) + " table entries";
  }
  return {};
}

}  // namespace spk::rt
