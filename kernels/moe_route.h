// The mixture-of-experts router as a backend op (Backend::moe_route): one spec, one fp32 reference, and
// a CUDA kernel (kernels/cuda/moe_route.cu) that must agree with it. Per token, following transformers:
//   score    = softmax(logits) over all routed experts, or sigmoid(logits)
//   choice   = score + e_score_correction_bias (when the model has one; used for selection only)
//   groups   = n_group > 1: a group's score is the sum of its two best choices; only the topk_group best
//              groups stay, the others' choices become 0 (as transformers' masked_fill(.., 0.0))
//   selected = the top_k best choices (ties: lower expert index first), best first
//   weight   = score of each selected expert; / (sum + 1e-20) when norm_topk_prob; * routed_scaling_factor
// Mixtral's softmax over the top-k logits equals softmax over all followed by renormalisation.
// The shared expert takes one more slot (column top_k): expert index num_experts with weight 1, or
// sigmoid of its gate logit (column num_experts of the logits row) when gated, as Qwen2-MoE.
#pragma once

#include <cstdint>

namespace spk {

enum class MoeScore { softmax, sigmoid };  // router score over all routed experts, in fp32

struct MoeRouteSpec {
  int num_experts = 0, top_k = 0;
  int n_group = 1, topk_group = 1;
  MoeScore score = MoeScore::softmax;
  bool norm_topk_prob = false;
  float scaling = 1.0f;
  bool shared = false, shared_gated = false;
  [[nodiscard]] int logit_cols() const { return num_experts + (shared_gated ? 1 : 0); }
  [[nodiscard]] int slots() const { return top_k + (shared ? 1 : 0); }
};

// logits [n, logit_cols()] fp32; bias [num_experts] or nullptr. Writes ids and weights [n, slots()].
// The spec must be valid (runtime/model/moe_router.h checks it against config.json).
void moe_route_reference(const MoeRouteSpec& spec, const float* logits, int64_t n, const float* bias,
                         int32_t* ids, float* weights);

}  // namespace spk
