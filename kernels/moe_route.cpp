#include "kernels/moe_route.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace spk {

namespace {

// Indices of the `k` largest of v[0..n), best first, ties to the lower index.
void top_indices(const float* v, int n, int k, int32_t* out, std::vector<int32_t>& order) {
  order.resize(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [v](int32_t a, int32_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  std::copy_n(order.begin(), k, out);
}

}  // namespace

void moe_route_reference(const MoeRouteSpec& s, const float* logits, int64_t n, const float* bias,
                         int32_t* ids, float* weights) {
  const int E = s.num_experts, K = s.top_k, C = s.logit_cols(), S = s.slots();
  std::vector<float> score(E), choice(E), group(s.n_group);
  std::vector<int32_t> order, keep(s.topk_group);
  for (int64_t t = 0; t < n; ++t) {
    const float* x = logits + t * C;
    if (s.score == MoeScore::softmax) {
      const float mx = *std::max_element(x, x + E);
      float sum = 0;
      for (int e = 0; e < E; ++e) sum += (score[e] = std::exp(x[e] - mx));
      for (int e = 0; e < E; ++e) score[e] /= sum;
    } else {
      for (int e = 0; e < E; ++e) score[e] = 1.0f / (1.0f + std::exp(-x[e]));
    }
    for (int e = 0; e < E; ++e) choice[e] = bias ? score[e] + bias[e] : score[e];
    if (s.n_group > 1) {
      const int per = E / s.n_group;
      for (int g = 0; g < s.n_group; ++g) {
        int32_t best[2];
        top_indices(choice.data() + g * per, per, 2, best, order);
        group[g] = choice[g * per + best[0]] + choice[g * per + best[1]];
      }
      top_indices(group.data(), s.n_group, s.topk_group, keep.data(), order);
      for (int g = 0; g < s.n_group; ++g)
        if (std::find(keep.begin(), keep.end(), g) == keep.end())
          std::fill(choice.begin() + g * per, choice.begin() + (g + 1) * per, 0.0f);
    }
    int32_t* id = ids + t * S;
    float* w = weights + t * S;
    top_indices(choice.data(), E, K, id, order);
    float sum = 0;
    for (int j = 0; j < K; ++j) sum += (w[j] = score[id[j]]);
    for (int j = 0; j < K; ++j) {
      if (s.norm_topk_prob) w[j] /= sum + 1e-20f;  // a division, as transformers (not a reciprocal)
      w[j] *= s.scaling;
    }
    if (s.shared) {
      id[K] = E;
      w[K] = s.shared_gated ? 1.0f / (1.0f + std::exp(-x[E])) : 1.0f;
    }
  }
}

}  // namespace spk
