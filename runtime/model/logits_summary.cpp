#include "runtime/model/logits_summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace spk::rt {

nlohmann::json summarize_logits(const float* logits, int vocab) {
  nlohmann::json j;
  double sum = 0, sq = 0, mx = 0;
  int argmax = 0;
  for (int v = 0; v < vocab; ++v) {
    sum += logits[v];
    sq += static_cast<double>(logits[v]) * logits[v];
    mx = std::max(mx, std::fabs(static_cast<double>(logits[v])));
    if (logits[v] > logits[argmax]) argmax = v;  // ties to the lowest id, as torch.argmax
  }
  std::vector<int> ids(vocab);
  std::iota(ids.begin(), ids.end(), 0);
  const int k = std::min(kSummaryTopK, vocab);
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(),
                    [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  ids.resize(k);
  std::vector<double> top;
  for (int id : ids) top.push_back(logits[id]);
  const int stride = std::max(1, (vocab + kSummaryStrided - 1) / kSummaryStrided);
  std::vector<double> strided;
  for (int v = 0; v < vocab; v += stride) strided.push_back(logits[v]);
  j["vocab_size"] = vocab;
  j["argmax"] = argmax;
  j["max_abs"] = mx;
  j["sum"] = sum;
  j["sum_sq"] = sq;
  j["top_k"] = {{"ids", ids}, {"values", top}};
  j["stride"] = stride;
  j["strided"] = strided;
  return j;
}

LogitsComparison compare_logits(const nlohmann::json& ref, const float* logits, int vocab) {
  LogitsComparison c;
  try {
    if (ref.at("vocab_size").get<int>() != vocab) {
      c.problem = "reference vocab_size " + ref.at("vocab_size").dump() + " but the model has " +
                  std::to_string(vocab);
      return c;
    }
    const double scale = std::max(ref.at("max_abs").get<double>(), 1e-30);
    double worst = 0;
    auto cmp = [&](int id, double want) {
      if (id < 0 || id >= vocab) throw std::out_of_range("id " + std::to_string(id));
      const double e = std::fabs(static_cast<double>(logits[id]) - want);
      if (c.worst_id < 0 || e > worst) {
        worst = e;
        c.worst_id = id;
      }
      ++c.compared;
    };
    const auto& ids = ref.at("top_k").at("ids");
    const auto& vals = ref.at("top_k").at("values");
    for (size_t i = 0; i < ids.size() && i < vals.size(); ++i) cmp(ids[i].get<int>(), vals[i].get<double>());
    const int stride = ref.at("stride").get<int>();
    const auto& strided = ref.at("strided");
    if (stride <= 0) throw std::out_of_range("stride");
    for (size_t i = 0; i < strided.size(); ++i) cmp(static_cast<int>(i) * stride, strided[i].get<double>());
    c.max_rel_err = worst / scale;
  } catch (const std::exception& e) {
    c.problem = std::string("malformed logits summary: ") + e.what();
  }
  return c;
}

}  // namespace spk::rt
