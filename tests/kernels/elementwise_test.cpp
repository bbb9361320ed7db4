#include <cmath>

#include "kernel_test_util.h"

namespace spk::test {
namespace {

class ElementwiseTest : public KernelTest {};

TEST_F(ElementwiseTest, EmbeddingGathersBf16Rows) {
  for (int64_t d : kSizes) {
    SCOPED_TRACE(seed_note() + " d=" + std::to_string(d));
    const int64_t vocab = 111;
    auto tf = randn(vocab * d);
    std::vector<uint16_t> t16(tf.size());
    for (size_t i = 0; i < tf.size(); ++i) t16[i] = f32_to_bf16(tf[i]);
    auto table = be_->import_weight(t16.data(), DType::bf16, {vocab, d}, nullptr, DType::bf16);
    ASSERT_TRUE(table.ok());
    std::vector<int32_t> ids(19);
    for (auto& id : ids) id = randint(0, vocab - 1);
    Tensor out = zeros({19, d});
    ASSERT_TRUE(be_->embedding(*table, i32(ids), out).ok());
    auto got = host(out);
    for (int64_t i = 0; i < 19; ++i)
      for (int64_t j = 0; j < d; ++j) ASSERT_EQ(got[i * d + j], bf16_to_f32(t16[ids[i] * d + j]));
  }
}

TEST_F(ElementwiseTest, EmbeddingRefusesIdOutsideVocab) {
  Tensor table = zeros({4, 2}), out = zeros({1, 2});
  auto st = be_->embedding(table, i32({4}), out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("token id 4"), std::string::npos);
}

TEST_F(ElementwiseTest, SiluMul) {
  for (int64_t n : kSizes) {
    SCOPED_TRACE(seed_note() + " n=" + std::to_string(n));
    auto g = randn(n * 19, 4.0f), u = randn(n * 19);
    Tensor out = zeros({n, 19});
    ASSERT_TRUE(be_->silu_mul(f32(g, {n, 19}), f32(u, {n, 19}), out).ok());
    auto got = host(out);
    for (size_t i = 0; i < g.size(); ++i) {
      const double ref = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
      ASSERT_NEAR(got[i], ref, 1e-6 * (1 + std::fabs(ref))) << i;
    }
  }
}

TEST_F(ElementwiseTest, GatherRows) {
  for (int64_t d : kSizes) {
    SCOPED_TRACE(seed_note() + " d=" + std::to_string(d));
    auto x = randn(19 * d);
    std::vector<int32_t> rows = {18, 0, 7, 7};
    Tensor out = zeros({4, d});
    ASSERT_TRUE(be_->gather_rows(f32(x, {19, d}), i32(rows), out).ok());
    auto got = host(out);
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < d; ++j) ASSERT_EQ(got[i * d + j], x[rows[i] * d + j]);
  }
}

TEST_F(ElementwiseTest, ImportWeightConvertsToF32) {
  std::vector<uint16_t> h = {f32_to_f16(1.5f), f32_to_f16(-2.25f)};
  auto t = be_->import_weight(h.data(), DType::f16, {2}, nullptr, DType::f32);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->dtype, DType::f32);
  EXPECT_EQ(host(*t), (std::vector<float>{1.5f, -2.25f}));
}

TEST(Backend, UnknownBackendIsRefusedByName) {
  auto b = make_backend({.name = "tpu"});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.error().message.find("'tpu'"), std::string::npos);
}

}  // namespace
}  // namespace spk::test
