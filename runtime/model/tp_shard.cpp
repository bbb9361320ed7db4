#include "runtime/model/tp_shard.h"

#include <algorithm>
#include <string>

namespace spk::rt {

namespace {

Status check_divisible(const char* what, int n, int world) {
  if (n % world == 0) return ok_status();
  return make_error(std::string(what) + " = " + std::to_string(n) +
                        " is not divisible by the tensor-parallel world " + std::to_string(world),
                    "pick --world among the divisors of " + std::to_string(n), false);
}

}  // namespace

Result<TpShardPlan> plan_tp_shard(const ModelConfig& c, int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world)
    return make_error(
        "tensor-parallel rank " + std::to_string(rank) + " is outside world " + std::to_string(world),
        "pass --rank in [0, --world) and --world >= 1", false);
  SPK_TRY(check_divisible("num_attention_heads", c.num_attention_heads, world));
  SPK_TRY(check_divisible("intermediate_size", c.intermediate_size, world));
  const int hk = c.num_key_value_heads;
  if (hk < 1)
    return make_error("num_key_value_heads = " + std::to_string(hk) + " in config.json",
                      "fix the checkpoint's config", false);
  TpShardPlan p;
  p.rank = rank;
  p.world = world;
  const int hq = c.num_attention_heads / world;
  p.q_heads = {rank * hq, hq};
  if (hk % world == 0) {
    const int n = hk / world;
    p.kv_heads = {rank * n, n};
  } else if (world > hk && world % hk == 0) {
    p.kv_replicas = world / hk;
    p.kv_heads = {rank / p.kv_replicas, 1};
  } else {
    return make_error("num_key_value_heads = " + std::to_string(hk) +
                          " can be neither split nor replicated across world " + std::to_string(world),
                      "use a --world that divides " + std::to_string(hk) + " or is a multiple of it", false);
  }
  // Each rank's query heads must map onto KV heads it holds (GQA group stays on one rank).
  const int group = c.num_attention_heads / hk;
  if (p.q_heads.begin / group < p.kv_heads.begin ||
      (p.q_heads.begin + p.q_heads.count - 1) / group >= p.kv_heads.begin + p.kv_heads.count)
    return make_error("query heads " + std::to_string(p.q_heads.begin) + ".." +
                          std::to_string(p.q_heads.begin + p.q_heads.count - 1) +
                          " do not fall on this rank's KV heads (heads " +
                          std::to_string(c.num_attention_heads) + ", kv heads " + std::to_string(hk) +
                          ", world " + std::to_string(world) + ")",
                      "use a --world that divides num_key_value_heads", false);
  const int m = c.intermediate_size / world;
  p.mlp = {rank * m, m};
  if (c.moe) {  // every expert is sharded along its intermediate dimension
    SPK_TRY(check_divisible("moe_intermediate_size", c.moe->moe_intermediate_size, world));
    const int e = c.moe->moe_intermediate_size / world;
    p.moe_mlp = {rank * e, e};
    if (c.moe->shared_expert_intermediate_size > 0) {
      SPK_TRY(
          check_divisible("shared_expert_intermediate_size", c.moe->shared_expert_intermediate_size, world));
      const int s = c.moe->shared_expert_intermediate_size / world;
      p.shared_mlp = {rank * s, s};
    }
  }
  p.vocab_per_rank = (c.vocab_size + world - 1) / world;
  const int vb = rank * p.vocab_per_rank;
  const int ve = std::min(c.vocab_size, vb + p.vocab_per_rank);
  p.vocab = {std::min(vb, c.vocab_size), std::max(0, ve - vb)};
  return p;
}

}  // namespace spk::rt
