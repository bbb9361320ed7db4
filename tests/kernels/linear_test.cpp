#include <cmath>

#include "kernel_test_util.h"

namespace spk::test {
namespace {

class LinearTest : public KernelTest {
 protected:
  // y = x W^T + b against a double reference using the exact stored weight values.
  void check(int64_t n, int64_t in, int64_t out, DType wdt, bool with_bias) {
    SCOPED_TRACE(seed_note() + " n=" + std::to_string(n) + " in=" + std::to_string(in) +
                 " out=" + std::to_string(out) + " w=" + std::string(dtype_name(wdt)));
    auto x = randn(n * in), wf = randn(out * in, 0.2f), b = randn(out);
    std::vector<uint16_t> w16(wf.size());
    for (size_t i = 0; i < wf.size(); ++i) {
      w16[i] = wdt == DType::bf16 ? f32_to_bf16(wf[i]) : f32_to_f16(wf[i]);
      if (wdt != DType::f32) wf[i] = wdt == DType::bf16 ? bf16_to_f32(w16[i]) : f16_to_f32(w16[i]);
    }
    const void* src = wdt == DType::f32 ? static_cast<const void*>(wf.data()) : w16.data();
    auto w = be_->import_weight(src, wdt, {out, in}, nullptr, wdt);
    ASSERT_TRUE(w.ok()) << w.error().what();
    Tensor xt = f32(x, {n, in}), bt = f32(b, {out}), yt = zeros({n, out});
    ASSERT_TRUE(be_->linear(xt, *w, with_bias ? &bt : nullptr, yt).ok());
    ASSERT_NO_FATAL_FAILURE(expect_linear(host(yt), x, wf, with_bias ? &b : nullptr, n, in, out));
  }
};

TEST_F(LinearTest, AwkwardSizesAllWeightDtypes) {
  for (int64_t s : kSizes)
    for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
      check(1, s, 19, dt, true);     // decode GEMV over a long or short row
      check(19, 111, s, dt, false);  // prefill, many outputs
      check(s, 19, 1, dt, true);     // many tokens, one output
      check(5, s, 3, dt, false);     // 4-row block plus a remainder row
    }
}

TEST_F(LinearTest, RefusesMismatchedShapes) {
  Tensor x = zeros({2, 8}), w = zeros({4, 7}), y = zeros({2, 4});
  auto st = be_->linear(x, w, nullptr, y);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("[4, 7]"), std::string::npos) << st.error().what();
}

}  // namespace
}  // namespace spk::test
