// The mixture-of-experts router: one implementation, its variants are data (MoeConfig). Per token, in
// fp32, following transformers:
//   score    = softmax(logits) over all routed experts, or sigmoid(logits)
//   choice   = score + e_score_correction_bias (when the model has one; used for selection only)
//   groups   = n_group > 1: a group's score is the sum of its two best choices; only the topk_group best
//              groups stay, the others' choices become 0 (as transformers' masked_fill(.., 0.0))
//   selected = the top_k best choices (ties: lower expert index first), best first
//   weight   = score of each selected expert; / (sum + 1e-20) when norm_topk_prob; * routed_scaling_factor
// Mixtral's softmax over the top-k logits equals softmax over all followed by renormalisation
// (norm_topk_prob = true). The shared-expert gate is not part of the router (see moe.h).
#pragma once

#include <cstdint>

#include "kernels/base/status.h"
#include "runtime/model/moe_config.h"

namespace spk::rt {

class MoeRouter {
 public:
  // Refuses group settings that do not fit the expert count, naming the keys.
  static Result<MoeRouter> make(const MoeConfig& c);

  [[nodiscard]] int num_experts() const { return num_experts_; }
  [[nodiscard]] int top_k() const { return top_k_; }

  // logits [n, num_experts] fp32 row-major; bias [num_experts] or nullptr. Writes ids [n, top_k] and
  // weights [n, top_k] (row-major).
  void route(const float* logits, int64_t n, const float* bias, int32_t* ids, float* weights) const;

 private:
  int num_experts_ = 0, top_k_ = 0, n_group_ = 1, topk_group_ = 1;
  MoeScore score_ = MoeScore::softmax;
  bool norm_topk_prob_ = false;
  float scaling_ = 1.0f;
};

}  // namespace spk::rt
