// The CPU mixture-of-experts FFN op (Backend::moe_ffn) against a naive double reference at awkward sizes
// (tokens 1/19/111, widths 1..33, bf16 and f32 experts of different widths, empty slots), batch
// invariance, and bad ids refused. Fresh random inputs each run; the seed is printed on failure
// (replay: SPARKCTL_TEST_SEED=<seed>).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "kernels/backend.h"

namespace spk::test {
namespace {

struct Case {
  int64_t n, d, k;
  std::vector<int64_t> widths;  // one per expert
};

class MoeFfnTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = std::random_device{}();
    if (const char* e = std::getenv("SPARKCTL_TEST_SEED"); e && *e) seed_ = std::strtoull(e, nullptr, 10);
    rng_.seed(seed_);
    auto b = make_backend({.name = "cpu", .threads = 2});
    ASSERT_TRUE(b.ok()) << b.error().what();
    be_ = std::move(*b);
  }
  std::vector<float> randn(int64_t n, float scale) {
    std::normal_distribution<float> d(0, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng_);
    return v;
  }
  // A weight tensor holding `v` (rounded to bf16 when asked; the returned values are what it holds).
  Tensor weight(std::vector<float>& v, std::vector<int64_t> shape, bool bf16) {
    if (!bf16) {
      auto buf = std::make_shared<std::vector<float>>(v);
      return *be_->import_weight(buf->data(), DType::f32, shape, buf, DType::f32);
    }
    auto buf = std::make_shared<std::vector<uint16_t>>(v.size());
    for (size_t i = 0; i < v.size(); ++i) v[i] = bf16_to_f32((*buf)[i] = f32_to_bf16(v[i]));
    return *be_->import_weight(buf->data(), DType::bf16, shape, buf, DType::bf16);
  }
  Tensor f32(const std::vector<float>& v, std::vector<int64_t> shape) {
    Tensor t = *be_->alloc(DType::f32, shape);
    EXPECT_TRUE(be_->upload(t, v.data(), v.size() * sizeof(float)).ok());
    return t;
  }
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::unique_ptr<Backend> be_;
};

TEST_F(MoeFfnTest, MatchesNaiveDoubleAtAwkwardSizes) {
  SCOPED_TRACE("seed " + std::to_string(seed_) + " (replay: SPARKCTL_TEST_SEED=" + std::to_string(seed_) +
               ")");
  const Case cases[] = {{1, 19, 1, {7}},
                        {19, 19, 3, {1, 19, 33, 5, 8}},
                        {111, 64, 2, {13, 24, 7, 31, 2, 9, 33}},
                        {5, 1, 2, {3, 4}}};
  for (const Case& c : cases) {
    SCOPED_TRACE("n " + std::to_string(c.n) + " d " + std::to_string(c.d) + " k " + std::to_string(c.k));
    const int64_t E = static_cast<int64_t>(c.widths.size());
    std::vector<ExpertWeights> ex;
    std::vector<std::vector<float>> G, U, D;
    for (int64_t e = 0; e < E; ++e) {
      const int64_t I = c.widths[e];
      G.push_back(randn(I * c.d, 1.0f / std::sqrt(float(c.d))));
      U.push_back(randn(I * c.d, 1.0f / std::sqrt(float(c.d))));
      D.push_back(randn(c.d * I, 1.0f / std::sqrt(float(I))));
      const bool bf16 = e % 2 == 0;
      ex.push_back(
          {weight(G[e], {I, c.d}, bf16), weight(U[e], {I, c.d}, bf16), weight(D[e], {c.d, I}, bf16)});
    }
    const auto x = randn(c.n * c.d, 1.0f);
    std::vector<int32_t> ids(c.n * c.k);
    std::vector<float> w = randn(c.n * c.k, 1.0f);
    for (int64_t t = 0; t < c.n; ++t) {  // distinct experts per token, some slots empty (-1)
      std::vector<int32_t> perm(E);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng_);
      for (int64_t j = 0; j < c.k; ++j)
        ids[t * c.k + j] = (j < E && std::uniform_int_distribution<int>(0, 5)(rng_) != 0) ? perm[j] : -1;
    }
    Tensor X = f32(x, {c.n, c.d}), W = f32(w, {c.n, c.k}), out = *be_->alloc(DType::f32, {c.n, c.d});
    Tensor I = *be_->alloc(DType::i32, {c.n, c.k});
    ASSERT_TRUE(be_->upload(I, ids.data(), ids.size() * sizeof(int32_t)).ok());
    auto st = be_->moe_ffn(X, ex, I, W, out);
    ASSERT_TRUE(st.ok()) << st.error().what();

    std::vector<double> want(c.n * c.d, 0.0);
    double mx = 0;
    for (int64_t t = 0; t < c.n; ++t)
      for (int64_t j = 0; j < c.k; ++j) {
        const int32_t e = ids[t * c.k + j];
        if (e < 0) continue;
        const int64_t In = c.widths[e];
        std::vector<double> a(In);
        for (int64_t i = 0; i < In; ++i) {
          double g = 0, u = 0;
          for (int64_t h = 0; h < c.d; ++h) {
            g += double(G[e][i * c.d + h]) * x[t * c.d + h];
            u += double(U[e][i * c.d + h]) * x[t * c.d + h];
          }
          a[i] = g / (1 + std::exp(-g)) * u;
        }
        for (int64_t h = 0; h < c.d; ++h) {
          double y = 0;
          for (int64_t i = 0; i < In; ++i) y += double(D[e][h * In + i]) * a[i];
          want[t * c.d + h] += w[t * c.k + j] * y;
        }
      }
    for (double v : want) mx = std::max(mx, std::fabs(v));
    double err = 0;
    for (int64_t i = 0; i < c.n * c.d; ++i) err = std::max(err, std::fabs(out.ptr<float>()[i] - want[i]));
    EXPECT_LE(err / std::max(mx, 1e-30), 1e-5) << "max |out| " << mx;
  }
}

// A row's output is bit-identical whether it runs alone or in a batch that routes other rows elsewhere.
TEST_F(MoeFfnTest, RowsDoNotDependOnTheBatch) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  const int64_t n = 23, d = 40, k = 2, E = 5, Iw = 17;
  std::vector<ExpertWeights> ex;
  for (int64_t e = 0; e < E; ++e) {
    auto g = randn(Iw * d, 0.2f), u = randn(Iw * d, 0.2f), dn = randn(d * Iw, 0.2f);
    ex.push_back({weight(g, {Iw, d}, true), weight(u, {Iw, d}, true), weight(dn, {d, Iw}, true)});
  }
  const auto x = randn(n * d, 1.0f), w = randn(n * k, 1.0f);
  std::vector<int32_t> ids(n * k);
  for (int64_t t = 0; t < n; ++t)
    ids[t * k] = t % E, ids[t * k + 1] = (t * 3 + 1) % E == t % E ? -1 : (t * 3 + 1) % E;
  Tensor X = f32(x, {n, d}), W = f32(w, {n, k}), out = *be_->alloc(DType::f32, {n, d});
  Tensor I = *be_->alloc(DType::i32, {n, k});
  ASSERT_TRUE(be_->upload(I, ids.data(), ids.size() * sizeof(int32_t)).ok());
  ASSERT_TRUE(be_->moe_ffn(X, ex, I, W, out).ok());
  for (int64_t t = 0; t < n; t += 5) {
    Tensor x1 = X.rows(t, 1), w1 = W.rows(t, 1), i1 = I.rows(t, 1), o1 = *be_->alloc(DType::f32, {1, d});
    ASSERT_TRUE(be_->moe_ffn(x1, ex, i1, w1, o1).ok());
    for (int64_t h = 0; h < d; ++h) ASSERT_EQ(o1.ptr<float>()[h], out.ptr<float>()[t * d + h]) << "row " << t;
  }
}

TEST_F(MoeFfnTest, ExpertOutsideTheListIsRefused) {
  std::vector<float> g(4 * 8, 0.1f), u = g, dn = g;
  std::vector<ExpertWeights> ex = {
      {weight(g, {4, 8}, false), weight(u, {4, 8}, false), weight(dn, {8, 4}, false)}};
  Tensor X = *be_->alloc(DType::f32, {2, 8}), W = *be_->alloc(DType::f32, {2, 1}),
         out = *be_->alloc(DType::f32, {2, 8}), I = *be_->alloc(DType::i32, {2, 1});
  const int32_t ids[2] = {0, 3};
  ASSERT_TRUE(be_->upload(I, ids, sizeof ids).ok());
  auto st = be_->moe_ffn(X, ex, I, W, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().what().find("token 1 slot 0 names expert 3 of 1"), std::string::npos)
      << st.error().what();
  // A down projection that does not fit its gate is refused by expert.
  std::vector<float> bad(5 * 8, 0.1f);
  ex[0].down = weight(bad, {8, 5}, false);
  st = be_->moe_ffn(X, ex, I, W, out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().what().find("expert 0"), std::string::npos) << st.error().what();
}

}  // namespace
}  // namespace spk::test
