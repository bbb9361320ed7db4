#include <cmath>

#include "kernel_test_util.h"

namespace spk::test {
namespace {

class RopeTest : public KernelTest {};

StepMeta one_seq_meta(const std::vector<int32_t>& positions) {
  StepMeta m;
  m.block_size = 1 << 20;
  m.positions = positions;
  m.slots = positions;
  int32_t mx = 0;
  for (int32_t p : positions) mx = std::max(mx, p + 1);
  m.seqs.push_back({0, static_cast<int32_t>(positions.size()), mx, 0});
  m.block_tables = {0};
  return m;
}

TEST_F(RopeTest, NeoxRotateHalfAtGivenPositions) {
  for (int64_t n : kSizes) {
    const int64_t hq = 4, hk = 2, hd = 32;
    SCOPED_TRACE(seed_note() + " n=" + std::to_string(n));
    std::vector<int32_t> pos(n);
    for (auto& p : pos) p = randint(0, 4000);
    std::sort(pos.begin(), pos.end());
    pos.erase(std::unique(pos.begin(), pos.end()), pos.end());  // positions of one sequence are distinct
    const int64_t m = static_cast<int64_t>(pos.size());
    auto q = randn(m * hq * hd), k = randn(m * hk * hd);
    auto inv = rope_inv_freq(hd, 500000.0, nullptr);
    Tensor qt = f32(q, {m, hq, hd}), kt = f32(k, {m, hk, hd}), it = f32(inv, {hd / 2});
    ASSERT_TRUE(be_->begin_step(one_seq_meta(pos)).ok());
    ASSERT_TRUE(be_->rope(qt, kt, it).ok());
    auto gq = host(qt), gk = host(kt);
    auto check = [&](const std::vector<float>& x, const std::vector<float>& got, int64_t heads) {
      for (int64_t t = 0; t < m; ++t)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t i = 0; i < hd / 2; ++i) {
            const double a = static_cast<float>(pos[t]) * inv[i];  // the fp32 angle HF forms
            const int64_t base = (t * heads + h) * hd;
            const double x1 = x[base + i], x2 = x[base + i + hd / 2];
            ASSERT_NEAR(got[base + i], x1 * std::cos(a) - x2 * std::sin(a), 1e-5)
                << t << "," << h << "," << i;
            ASSERT_NEAR(got[base + i + hd / 2], x2 * std::cos(a) + x1 * std::sin(a), 1e-5);
          }
    };
    check(q, gq, hq);
    check(k, gk, hk);
  }
}

TEST_F(RopeTest, InvFreqDefaultMatchesFormula) {
  auto inv = rope_inv_freq(64, 10000.0, nullptr);
  ASSERT_EQ(inv.size(), 32u);
  for (int i = 0; i < 32; ++i) EXPECT_FLOAT_EQ(inv[i], static_cast<float>(std::pow(10000.0, -2.0 * i / 64)));
}

// Llama 3 scaling: short wavelengths untouched, long ones divided by `factor`, the band between
// interpolated (strictly between the two).
TEST_F(RopeTest, Llama3ScalingBands) {
  Llama3RopeScaling s{.factor = 8.0,
                      .low_freq_factor = 1.0,
                      .high_freq_factor = 4.0,
                      .original_max_position_embeddings = 8192};
  const int hd = 128;
  auto plain = rope_inv_freq(hd, 500000.0, nullptr);
  auto scaled = rope_inv_freq(hd, 500000.0, &s);
  int hi = 0, lo = 0, mid = 0;
  for (int i = 0; i < hd / 2; ++i) {
    const double wavelen = 2 * M_PI / plain[i];
    if (wavelen < 8192.0 / 4.0) {
      EXPECT_FLOAT_EQ(scaled[i], plain[i]) << i;
      ++hi;
    } else if (wavelen > 8192.0) {
      EXPECT_FLOAT_EQ(scaled[i], plain[i] / 8.0f) << i;
      ++lo;
    } else {
      EXPECT_LT(scaled[i], plain[i]) << i;
      EXPECT_GT(scaled[i], plain[i] / 8.0f) << i;
      ++mid;
    }
  }
  EXPECT_GT(hi, 0);
  EXPECT_GT(lo, 0);
  EXPECT_GT(mid, 0);
}

TEST_F(RopeTest, RefusesWithoutStep) {
  Tensor q = zeros({1, 1, 4}), k = zeros({1, 1, 4}), inv = zeros({2});
  EXPECT_FALSE(be_->rope(q, k, inv).ok());
}

}  // namespace
}  // namespace spk::test
