#include "kernels/cuda/attention/select.h"

#include <algorithm>

#include "kernels/cuda/cuda_ops.h"

namespace spk::cuda {

AttnLaunch attention_launch(const AttnKnobs& k, int n, int max_q_len, int hq, int hk, int d) {
  AttnLaunch a;
  // Long prefill chunks take the tiled kernel (every query re-reads every key: tile them through shared
  // memory); decode tokens and short chunks the per-token kernel.
  a.tiled = max_q_len >= 16 && prefill_attention_supports(d);
  // Small decode batches spread each head over several blocks (split-KV), else one block per head leaves
  // most SMs idle at long contexts.
  a.shared = k.share_kv && paged_attention_shares_kv(hq, hk, d);
  a.splits = a.tiled                ? 1
             : a.shared             ? std::clamp(2 * k.sm_count / std::max(1, n * hk), 1, kMaxSharedSplits)
             : n <= kMaxSplitTokens ? kSplits
                                    : 1;
  if (a.splits > 1) {
    a.partial_bytes = static_cast<size_t>(n) * hq * a.splits * (d + 2) * sizeof(float);
    if (a.shared && k.split_merge) a.counter_bytes = static_cast<size_t>(n) * hk * sizeof(int);
  }
  return a;
}

}  // namespace spk::cuda
