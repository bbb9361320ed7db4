#include "runtime/model/moe_router.h"

#include <string>
#include <vector>

namespace spk::rt {

namespace {

Error bad(const std::string& what) {
  return make_error("mixture-of-experts router: " + what, "fix config.json (the MoE keys named above)");
}

}  // namespace

Result<MoeRouter> MoeRouter::make(const MoeConfig& c) {
  MoeRouter r;
  MoeRouteSpec& s = r.spec_;
  s.num_experts = c.num_experts;
  s.top_k = c.top_k;
  s.n_group = c.n_group;
  s.topk_group = c.topk_group;
  s.score = c.score;
  s.norm_topk_prob = c.norm_topk_prob;
  s.scaling = static_cast<float>(c.routed_scaling_factor);
  if (c.num_experts < 1 || c.top_k < 1 || c.top_k > c.num_experts)
    return bad("num_experts_per_tok = " + std::to_string(c.top_k) + " with " + std::to_string(c.num_experts) +
               " experts (need 1 <= num_experts_per_tok <= experts)");
  if (c.n_group < 1 || c.num_experts % c.n_group != 0)
    return bad("n_group = " + std::to_string(c.n_group) + " does not divide the " +
               std::to_string(c.num_experts) + " experts");
  if (c.topk_group < 1 || c.topk_group > c.n_group)
    return bad("topk_group = " + std::to_string(c.topk_group) +
               " is outside [1, n_group = " + std::to_string(c.n_group) + "]");
  const int per_group = c.num_experts / c.n_group;
  if (c.n_group > 1 && per_group < 2)
    return bad("n_group = " + std::to_string(c.n_group) + " leaves fewer than 2 experts a group");
  if (c.top_k > c.topk_group * per_group)
    return bad("num_experts_per_tok = " + std::to_string(c.top_k) + " exceeds the " +
               std::to_string(c.topk_group * per_group) + " experts of the topk_group best groups");
  if (!(c.routed_scaling_factor > 0))
    return bad("routed_scaling_factor = " + std::to_string(c.routed_scaling_factor) + " must be > 0");
  return r;
}

}  // namespace spk::rt
