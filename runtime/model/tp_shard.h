// How one tensor-parallel rank slices a model: attention heads, KV heads, MLP columns and vocab rows.
// Contract: the plan is pure arithmetic on the config; layers use it to pick their slice of a
// [out,in] weight (row range = pointer offset into the mmap) or of the in-dim (strided host copy).
// KV heads: split when num_key_value_heads % world == 0, else replicated when world > hk and
// world % hk == 0 (each KV head serves world/hk ranks, as vLLM does). Anything else is refused.
#pragma once

#include "kernels/base/status.h"
#include "runtime/model/model_config.h"

namespace spk::rt {

struct ShardRange {
  int begin = 0;  // first index owned by this rank
  int count = 0;  // how many
};

struct TpShardPlan {
  int rank = 0;
  int world = 1;
  ShardRange q_heads;      // of num_attention_heads
  ShardRange kv_heads;     // of num_key_value_heads (count 1 and shared when replicated)
  int kv_replicas = 1;     // ranks sharing one KV head (1 = split, no replication)
  ShardRange mlp;          // columns of intermediate_size (gate/up rows, down in-dim)
  ShardRange moe_mlp;      // columns of moe_intermediate_size, of every routed expert (MoE models)
  ShardRange shared_mlp;   // columns of shared_expert_intermediate_size (MoE models with a shared expert)
  ShardRange vocab;        // rows of the embedding / LM head (last rank may hold fewer)
  int vocab_per_rank = 0;  // ceil(vocab / world): padded shard size for all_gather_rows
};

// Errors name the bad head count and the world, and say what would work.
Result<TpShardPlan> plan_tp_shard(const ModelConfig& config, int rank, int world);

}  // namespace spk::rt
