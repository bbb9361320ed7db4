#include "runtime/model/moe_router.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

namespace spk::rt {

namespace {

Error bad(const std::string& what) {
  return make_error("mixture-of-experts router: " + what, "fix config.json (the MoE keys named above)");
}

// Indices of the `k` largest of v[0..n), best first, ties to the lower index.
void top_indices(const float* v, int n, int k, int32_t* out, std::vector<int32_t>& order) {
  order.resize(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [v](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  std::copy_n(order.begin(), k, out);
}

}  // namespace

Result<MoeRouter> MoeRouter::make(const MoeConfig& c) {
  MoeRouter r;
  r.num_experts_ = c.num_experts;
  r.top_k_ = c.top_k;
  r.n_group_ = c.n_group;
  r.topk_group_ = c.topk_group;
  r.score_ = c.score;
  r.norm_topk_prob_ = c.norm_topk_prob;
  r.scaling_ = static_cast<float>(c.routed_scaling_factor);
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

void MoeRouter::route(const float* logits, int64_t n, const float* bias, int32_t* ids, float* weights) const {
  const int E = num_experts_, K = top_k_;
  std::vector<float> score(E), choice(E), group(n_group_);
  std::vector<int32_t> order, keep(topk_group_);
  for (int64_t t = 0; t < n; ++t) {
    const float* x = logits + t * E;
    if (score_ == MoeScore::softmax) {
      const float mx = *std::max_element(x, x + E);
      float sum = 0;
      for (int e = 0; e < E; ++e) sum += (score[e] = std::exp(x[e] - mx));
      for (int e = 0; e < E; ++e) score[e] /= sum;
    } else {
      for (int e = 0; e < E; ++e) score[e] = 1.0f / (1.0f + std::exp(-x[e]));
    }
    for (int e = 0; e < E; ++e) choice[e] = bias ? score[e] + bias[e] : score[e];
    if (n_group_ > 1) {
      const int per = E / n_group_;
      for (int g = 0; g < n_group_; ++g) {
        int32_t best[2];
        top_indices(choice.data() + g * per, per, 2, best, order);
        group[g] = choice[g * per + best[0]] + choice[g * per + best[1]];
      }
      top_indices(group.data(), n_group_, topk_group_, keep.data(), order);
      for (int g = 0; g < n_group_; ++g)
        if (std::find(keep.begin(), keep.end(), g) == keep.end())
          std::fill(choice.begin() + g * per, choice.begin() + (g + 1) * per, 0.0f);
    }
    int32_t* id = ids + t * K;
    float* w = weights + t * K;
    top_indices(choice.data(), E, K, id, order);
    float sum = 0;
    for (int j = 0; j < K; ++j) sum += (w[j] = score[id[j]]);
    for (int j = 0; j < K; ++j) {
      if (norm_topk_prob_) w[j] /= sum + 1e-20f;  // a division, as transformers (not a reciprocal)
      w[j] *= scaling_;
    }
  }
}

}  // namespace spk::rt
