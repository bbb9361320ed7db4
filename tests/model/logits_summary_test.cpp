#include "runtime/model/logits_summary.h"

#include <gtest/gtest.h>

#include <random>

namespace spk::test {
namespace {

std::vector<float> random_logits(int v, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0, 3);
  std::vector<float> l(v);
  for (auto& x : l) x = d(rng);
  return l;
}

TEST(LogitsSummary, SmallForA150kVocabAndSelfConsistent) {
  const int V = 151669;
  auto l = random_logits(V, 3);
  const auto s = rt::summarize_logits(l.data(), V);
  EXPECT_LT(s.dump().size(), 200u * 1024);
  EXPECT_EQ(s["top_k"]["ids"].size(), 64u);
  EXPECT_EQ(s["argmax"], s["top_k"]["ids"][0]);
  const auto c = rt::compare_logits(s, l.data(), V);
  EXPECT_TRUE(c.problem.empty()) << c.problem;
  EXPECT_LT(c.max_rel_err, 1e-6);
  EXPECT_EQ(c.compared, 64 + (V + s["stride"].get<int>() - 1) / s["stride"].get<int>());
}

TEST(LogitsSummary, DetectsADifferenceAtATopId) {
  const int V = 1000;
  auto l = random_logits(V, 4);
  const auto s = rt::summarize_logits(l.data(), V);
  const int top = s["top_k"]["ids"][5];
  l[top] += 0.1f * s["max_abs"].get<float>();
  const auto c = rt::compare_logits(s, l.data(), V);
  EXPECT_NEAR(c.max_rel_err, 0.1, 1e-4);
  EXPECT_EQ(c.worst_id, top);
}

TEST(LogitsSummary, VocabMismatchIsAProblem) {
  auto l = random_logits(100, 5);
  const auto s = rt::summarize_logits(l.data(), 100);
  EXPECT_FALSE(rt::compare_logits(s, l.data(), 99).problem.empty());
}

}  // namespace
}  // namespace spk::test
