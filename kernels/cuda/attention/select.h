// The attention chooser: which kernel a call takes (tiled prefill, GQA-shared or per-head decode) and how
// many split-KV blocks each (token, head) gets. No algorithm here: the kernels are in attention/*.cu.
// The op (attention_op.cpp) and the scratch plan (scratch_plan.cpp) both ask it, so the reserved partials
// are exactly what a launch uses.
#pragma once

#include <cstddef>

namespace spk::cuda {

// Split-KV. The per-head kernel: kSplits blocks per (token, head) for decode steps of up to
// kMaxSplitTokens tokens (at batch 32+ the heads alone fill the SMs; measured: splitting there cost 25%).
// The GQA-shared kernel has hq / hk times fewer blocks per token: its grid has up to about two blocks per
// SM, at most kMaxSharedSplits, of which a token uses as many as its context needs (32 keys a split).
inline constexpr int kSplits = 8;
inline constexpr int kMaxSplitTokens = 8;
inline constexpr int kMaxSharedSplits = 16;

// How one attention call launches (cuda_backend's attention op): the tiled prefill kernel, the
// GQA-shared decode kernel or the per-head one, and how many split-KV blocks each (token, head) gets.
struct AttnKnobs {
  bool share_kv = true;     // SPARKCTL_SHARED_KV_ATTN
  bool split_merge = true;  // SPARKCTL_SPLIT_MERGE
  int sm_count = 132;
};
struct AttnLaunch {
  bool tiled = false, shared = false;
  int splits = 1;
  size_t partial_bytes = 0;  // split-KV partials: n * hq * splits * (d + 2) floats (0 when unsplit)
  size_t counter_bytes = 0;  // the shared kernel's split counters: n * hk ints (0 when unused)
};
AttnLaunch attention_launch(const AttnKnobs& k, int n_tokens, int max_q_len, int hq, int hk, int d);

}  // namespace spk::cuda
