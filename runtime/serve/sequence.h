// One generation request as the scheduler sees it: token ids, how many of them already sit in the KV
// cache, and the blocks that hold them. Prompt and generated tokens are one list, so a preempted
// sequence simply recomputes all of them (vLLM V1's "num_computed_tokens" view), minus whatever the
// prefix cache still holds.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/serve/prefix_hash.h"

namespace spk::rt {

enum class SeqState { waiting, running, finished };

struct Sequence {
  uint64_t id = 0;
  std::vector<int32_t> tokens;  // prompt followed by generated tokens
  int prompt_len = 0;
  int num_computed = 0;  // tokens[0, num_computed) have their KV in block_table
  std::vector<int32_t> block_table;
  SeqState state = SeqState::waiting;
  int num_preemptions = 0;
  // Prefix caching: keys of full blocks of `tokens`, extended lazily (prefix_hash.h), and how many
  // leading entries of block_table are registered in (or were taken from) the cache.
  std::vector<BlockHash> block_keys;
  int num_keyed_blocks = 0;
  int num_cached_tokens = -1;  // prompt tokens reused at the first admission (-1: not admitted yet)

  [[nodiscard]] int num_tokens() const { return static_cast<int>(tokens.size()); }
  [[nodiscard]] int num_generated() const { return num_tokens() - prompt_len; }
  [[nodiscard]] int num_uncomputed() const { return num_tokens() - num_computed; }
};

}  // namespace spk::rt
