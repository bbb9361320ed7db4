#include "runtime/serve/block_manager.h"

#include <algorithm>
#include <cassert>

namespace spk::rt {

BlockManager::BlockManager(int num_blocks, int block_size)
    : block_size_(block_size), refs_(static_cast<size_t>(std::max(num_blocks, 0)), 0) {
  assert(block_size > 0);
  free_.reserve(refs_.size());
  for (int b = 0; b < num_blocks; ++b) free_.push_back(b);  // sorted ascending = a valid min-heap
}

double BlockManager::usage() const {
  if (refs_.empty()) return 0.0;
  return 1.0 - static_cast<double>(free_.size()) / static_cast<double>(refs_.size());
}

int BlockManager::blocks_missing(const std::vector<int32_t>& table, int tokens) const {
  return std::max(0, blocks_for(tokens) - static_cast<int>(table.size()));
}

bool BlockManager::grow(std::vector<int32_t>& table, int tokens) {
  int need = blocks_missing(table, tokens);
  if (need > num_free()) return false;
  for (int i = 0; i < need; ++i) {
    std::pop_heap(free_.begin(), free_.end(), std::greater<>());  // lowest id first: reproducible runs
    int32_t b = free_.back();
    free_.pop_back();
    refs_[static_cast<size_t>(b)] = 1;
    table.push_back(b);
  }
  return true;
}

void BlockManager::release(std::vector<int32_t>& table) {
  for (int32_t b : table) {
    int& r = refs_.at(static_cast<size_t>(b));
    assert(r > 0 && "block released twice: scheduler bug");
    if (r <= 0) continue;  // never put a block on the free list twice
    if (--r == 0) {
      free_.push_back(b);
      std::push_heap(free_.begin(), free_.end(), std::greater<>());
    }
  }
  table.clear();
}

}  // namespace spk::rt
