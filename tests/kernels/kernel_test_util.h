// Shared helpers of the kernel tests: a seeded RNG whose seed is printed on failure (set
// SPARKCTL_TEST_SEED to replay), tensors from host vectors, and the backend under test.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace spk::test {

inline constexpr int64_t kSizes[] = {1, 19, 111, 989};

inline uint64_t test_seed() {
  if (const char* e = std::getenv("SPARKCTL_TEST_SEED"); e && *e) return std::strtoull(e, nullptr, 10);
  return std::random_device{}();
}

class KernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    seed_ = test_seed();
    rng_.seed(seed_);
    auto b = make_backend({.name = "cpu", .threads = 2});
    ASSERT_TRUE(b.ok()) << b.error().what();
    be_ = std::move(b).value();
  }
  // Printed with every failing assertion of the test.
  std::string seed_note() const {
    return "seed " + std::to_string(seed_) + " (replay: SPARKCTL_TEST_SEED=" + std::to_string(seed_) + ")";
  }

  std::vector<float> randn(int64_t n, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng_);
    return v;
  }
  int32_t randint(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng_); }

  Tensor f32(const std::vector<float>& v, std::vector<int64_t> shape) {
    auto t = be_->alloc(DType::f32, std::move(shape));
    EXPECT_TRUE(t.ok());
    EXPECT_TRUE(be_->upload(*t, v.data(), v.size() * 4).ok());
    return *t;
  }
  Tensor i32(const std::vector<int32_t>& v) {
    auto t = be_->alloc(DType::i32, {static_cast<int64_t>(v.size())});
    EXPECT_TRUE(t.ok());
    EXPECT_TRUE(be_->upload(*t, v.data(), v.size() * 4).ok());
    return *t;
  }
  Tensor zeros(std::vector<int64_t> shape) { return *be_->alloc(DType::f32, std::move(shape)); }
  std::vector<float> host(const Tensor& t) {
    std::vector<float> v(t.numel());
    EXPECT_TRUE(be_->download(t, v.data(), v.size() * 4).ok());
    return v;
  }

  // y [n, out] against x [n, in] . w[out, in]^T (+ b) in double, within 2e-6 of the sum of the terms'
  // magnitudes (fp32 accumulation in any order).
  static void expect_linear(const std::vector<float>& y, const std::vector<float>& x,
                            const std::vector<float>& w, const std::vector<float>* b, int64_t n, int64_t in,
                            int64_t out) {
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < out; ++j) {
        double ref = b ? (*b)[j] : 0.0, mag = std::fabs(ref);
        for (int64_t k = 0; k < in; ++k) {
          ref += static_cast<double>(x[i * in + k]) * w[j * in + k];
          mag += std::fabs(static_cast<double>(x[i * in + k]) * w[j * in + k]);
        }
        ASSERT_NEAR(y[i * out + j], ref, 2e-6 * mag + 1e-30) << "row " << i << " col " << j;
      }
  }

  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  std::unique_ptr<Backend> be_;
};

}  // namespace spk::test
