#include <cmath>

#include "kernel_test_util.h"

namespace spk::test {
namespace {

std::vector<double> ref_norm(const std::vector<float>& x, const std::vector<float>& w, int64_t d, float eps) {
  std::vector<double> out(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    double ss = 0;
    for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(x[r * d + i]) * x[r * d + i];
    const double inv = 1.0 / std::sqrt(ss / d + eps);
    for (int64_t i = 0; i < d; ++i) out[r * d + i] = w[i] * x[r * d + i] * inv;
  }
  return out;
}

class NormTest : public KernelTest {};

TEST_F(NormTest, RmsNormAwkwardSizes) {
  for (int64_t d : kSizes)
    for (int64_t rows : {int64_t{1}, int64_t{19}, int64_t{111}}) {
      SCOPED_TRACE(seed_note() + " d=" + std::to_string(d) + " rows=" + std::to_string(rows));
      auto x = randn(rows * d, 3.0f), w = randn(d);
      Tensor xt = f32(x, {rows, d}), wt = f32(w, {d}), out = zeros({rows, d});
      ASSERT_TRUE(be_->rmsnorm(xt, wt, 1e-6f, out).ok());
      auto got = host(out);
      auto ref = ref_norm(x, w, d, 1e-6f);
      for (size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(got[i], ref[i], 1e-5 * (1 + std::fabs(ref[i]))) << i;
    }
}

TEST_F(NormTest, PerHeadNormOverThreeDimsInPlace) {
  const int64_t n = 19, heads = 3, hd = 16;
  SCOPED_TRACE(seed_note());
  auto x = randn(n * heads * hd), w = randn(hd);
  Tensor xt = f32(x, {n, heads, hd}), wt = f32(w, {hd});
  ASSERT_TRUE(be_->rmsnorm(xt, wt, 1e-5f, xt).ok());  // out aliases x
  auto got = host(xt);
  auto ref = ref_norm(x, w, hd, 1e-5f);
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-5 * (1 + std::fabs(ref[i]))) << i;
}

TEST_F(NormTest, AddRmsNormUpdatesResidual) {
  for (int64_t d : kSizes) {
    SCOPED_TRACE(seed_note() + " d=" + std::to_string(d));
    const int64_t rows = 7;
    auto r = randn(rows * d), delta = randn(rows * d), w = randn(d);
    Tensor rt = f32(r, {rows, d}), dt = f32(delta, {rows, d}), wt = f32(w, {d}), out = zeros({rows, d});
    ASSERT_TRUE(be_->add_rmsnorm(rt, dt, wt, 1e-6f, out).ok());
    std::vector<float> sum(r.size());
    for (size_t i = 0; i < r.size(); ++i) sum[i] = r[i] + delta[i];
    auto ref = ref_norm(sum, w, d, 1e-6f);
    auto got = host(out), res = host(rt);
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_EQ(res[i], sum[i]) << i;
      ASSERT_NEAR(got[i], ref[i], 1e-5 * (1 + std::fabs(ref[i]))) << i;
    }
  }
}

TEST_F(NormTest, RefusesWrongWeightLength) {
  Tensor x = zeros({2, 8}), w = zeros({7}), out = zeros({2, 8});
  EXPECT_FALSE(be_->rmsnorm(x, w, 1e-6f, out).ok());
}

}  // namespace
}  // namespace spk::test
