#include "kernels/cuda/scratch_plan.h"

#include <algorithm>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/linear/gemm.h"
#include "kernels/cuda/moe/moe_ffn.h"
#include "kernels/cuda/moe/moe_plan.h"

namespace spk::cuda {
size_t meta_tile_words(int max_tokens, int max_seqs) {
  // Each sequence's q_len tokens make ceil(q_len / tile) tiles: at most tokens / tile + sequences.
  return 2 * (static_cast<size_t>(max_tokens) / kPrefillTileQ + static_cast<size_t>(std::max(max_seqs, 1)));
}

size_t meta_capacity(size_t need, size_t cap) {
  return need <= cap ? cap : (std::max(need, std::max<size_t>(256, 2 * cap)) + 3) / 4 * 4;
}

ScratchNeeds plan_scratch(const StepShapes& s, const AttnKnobs& k) {
  ScratchNeeds n;
  const int T = std::max(s.max_tokens, 1), S = std::max(s.max_seqs, 1);
  // Attention splits only small steps, so the largest partials come from the token counts that still split:
  // walk them (cheap: splitting stops within 2 * sm_count tokens, or kMaxSplitTokens).
  if (s.q_heads > 0 && s.kv_heads > 0 && s.head_dim > 0)
    for (int t = 1; t <= T; ++t) {
      const AttnLaunch a = attention_launch(k, t, 1, s.q_heads, s.kv_heads, s.head_dim);
      if (a.splits == 1 && t > kMaxSplitTokens && t * s.kv_heads > 2 * k.sm_count) break;
      n.partial = std::max(n.partial, a.partial_bytes);
      n.counters = std::max(n.counters, a.counter_bytes);
    }
  n.gemm_tokens = T;
  n.gemm_k = std::max(s.max_linear_in, 1);
  n.gemm = Gemm::bytes_for(n.gemm_tokens, n.gemm_k);
  if (s.moe_experts > 0) {
    n.moe = moe::carve(nullptr, T * std::max(s.moe_slots, 1), s.moe_experts, s.hidden, s.moe_max_inter,
                       nullptr, s.moe_quantized);
    n.moe_tables = static_cast<size_t>(s.moe_layers) * s.moe_experts *
                   (s.moe_quantized ? sizeof(MoeExpertQ) : sizeof(MoeExpert));
  }
  n.meta_tokens = static_cast<size_t>(T);
  n.meta_tiles = meta_tile_words(T, S);
  n.meta_tables = static_cast<size_t>(std::max<int64_t>(s.max_table_entries, 1));
  n.meta = (3 * meta_capacity(n.meta_tokens, 0) + meta_capacity(n.meta_tiles, 0) +
            meta_capacity(n.meta_tables, 0)) *
           sizeof(int32_t);
  n.sample_rows = sample_capacity(static_cast<size_t>(S));
  n.sample = n.sample_rows * kArgmaxSlots * sizeof(unsigned long long);
  return n;
}

}  // namespace spk::cuda
