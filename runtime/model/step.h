// One model step over a flattened, variable-length batch (the continuous-batching contract between the
// scheduler and the model). Prefill chunks and decode tokens of many sequences share one step.
//
// For each sequence s in `seqs`: its new tokens are tokens[q_start, q_start+q_len) at positions
// positions[q_start, ...); after the step its KV cache holds ctx_len tokens (ctx_len - q_len were already
// cached). Its KV lives in the blocks block_table[0 .. ceil(ctx_len / block_size)) of the pool; token at
// position p sits in block block_table[p / block_size], slot p % block_size. Attention is causal.
#pragma once

#include <cstdint>
#include <vector>

namespace spk::rt {

struct SeqSlice {
  int32_t q_start = 0;
  int32_t q_len = 0;
  int32_t ctx_len = 0;
  std::vector<int32_t> block_table;
};

struct StepBatch {
  std::vector<int32_t> tokens;     // all new tokens of all sequences, sequence after sequence
  std::vector<int32_t> positions;  // same length as tokens
  std::vector<SeqSlice> seqs;
  // Rows of `tokens` whose logits are wanted (usually the last new token of each sequence that
  // finishes its prefill or decodes). Logits come back in this order.
  std::vector<int32_t> logit_rows;
};

}  // namespace spk::rt
