// GPTQ int4 (kernels/formats/gptq_int4.h): the checkpoint layout on a hand-packed case (nibble order, the
// zero - 1 convention, g_idx), the quantizer's round trip, the CPU linear against dequantize + a double
// reference at awkward sizes (group 32 / one group / act order; n 1, 3, 17), and bad layouts refused by
// tensor name and expected shape.
#include "kernels/formats/gptq_int4.h"

#include <cmath>

#include "kernel_test_util.h"

namespace spk::test {
namespace {

// A hand-written layer: out 8, in 16, group 8 (2 groups). q[c][o] = (c + o) % 16; zero of group g, column
// o = g + 2 (stored g + 1); scale of (g, o) = 0.5 * (o + 1) * (g + 1).
GptqTensors hand_case() {
  GptqTensors t;
  t.out = 8, t.in = 16, t.group_size = 8;
  t.qweight.assign(2 * 8, 0);
  for (int c = 0; c < 16; ++c)
    for (int o = 0; o < 8; ++o) {
      auto& word = reinterpret_cast<uint32_t&>(t.qweight[(c / 8) * 8 + o]);
      word |= static_cast<uint32_t>((c + o) % 16) << (4 * (c % 8));
    }
  t.qzeros.assign(2, 0);
  for (int g = 0; g < 2; ++g)
    for (int o = 0; o < 8; ++o) {
      auto& word = reinterpret_cast<uint32_t&>(t.qzeros[g]);
      word |= static_cast<uint32_t>(g + 1) << (4 * o);  // stored = zero - 1
    }
  for (int g = 0; g < 2; ++g)
    for (int o = 0; o < 8; ++o) t.scales.push_back(f32_to_f16(0.5f * (o + 1) * (g + 1)));
  for (int c = 0; c < 16; ++c) t.g_idx.push_back(c / 8);
  return t;
}

TEST(GptqInt4, HandPackedLayoutDequantizes) {
  const GptqTensors t = hand_case();
  // Nibble order spelled out: qweight[0][0] holds rows 0..7 of column 0 = 0,1,..,7, low nibble first.
  EXPECT_EQ(static_cast<uint32_t>(t.qweight[0]), 0x76543210u);
  EXPECT_EQ(static_cast<uint32_t>(t.qzeros[1]), 0x22222222u);  // group 1: zero 3, stored 2
  LinearWeight w = gptq_host_weight(t, false);
  ASSERT_TRUE(check_gptq_layout(w, "layer").ok());
  std::vector<float> d(8 * 16);
  gptq_dequantize(w, d.data());
  for (int o = 0; o < 8; ++o)
    for (int c = 0; c < 16; ++c) {
      const int g = c / 8, q = (c + o) % 16, zero = g + 2;
      EXPECT_EQ(d[o * 16 + c], 0.5f * (o + 1) * (g + 1) * static_cast<float>(q - zero)) << o << "," << c;
    }
  // The same tensors with an explicit g_idx swapping the groups of columns 0 and 15.
  GptqTensors p = t;
  p.g_idx[0] = 1, p.g_idx[15] = 0;
  LinearWeight wp = gptq_host_weight(p, true);
  ASSERT_TRUE(check_gptq_layout(wp, "layer").ok());
  gptq_dequantize(wp, d.data());
  EXPECT_EQ(d[0 * 16 + 0], 0.5f * 1 * 2 * static_cast<float>(0 - 3));
  EXPECT_EQ(d[2 * 16 + 15], 0.5f * 3 * 1 * static_cast<float>(1 - 2));  // q (15+2)%16 = 1, group 0
}

class GptqLinearTest : public KernelTest {
 protected:
  void check(int64_t n, int64_t out, int64_t in, int group, bool sym, bool act_order) {
    SCOPED_TRACE(seed_note() + " n=" + std::to_string(n) + " out=" + std::to_string(out) +
                 " in=" + std::to_string(in) + " group=" + std::to_string(group) + (sym ? " sym" : " asym") +
                 (act_order ? " act-order" : ""));
    const auto wf = randn(out * in, 0.1f), x = randn(n * in), b = randn(out);
    const GptqTensors t = gptq_quantize_rtn(wf.data(), out, in, group, sym, act_order);
    const LinearWeight w = gptq_host_weight(t, act_order);
    ASSERT_TRUE(check_gptq_layout(w, "w").ok()) << check_gptq_layout(w, "w").error().what();
    std::vector<float> d(out * in);
    gptq_dequantize(w, d.data());
    // RTN is within half a step of the weight (+ the f16 rounding of the scale; asym may clip by a step).
    for (int64_t o = 0; o < out; ++o)
      for (int64_t c = 0; c < in; ++c) {
        const int64_t g = act_order ? t.g_idx[c] : c / t.group_size;
        const float s = f16_to_f32(t.scales[g * out + o]);
        ASSERT_LE(std::fabs(d[o * in + c] - wf[o * in + c]), (sym ? 0.51f : 1.01f) * s + 1e-6f)
            << o << "," << c;
      }
    for (bool with_bias : {false, true}) {
      Tensor xt = f32(x, {n, in}), bt = f32(b, {out}), yt = zeros({n, out});
      auto st = be_->linear(xt, w, with_bias ? &bt : nullptr, yt);
      ASSERT_TRUE(st.ok()) << st.error().what();
      ASSERT_NO_FATAL_FAILURE(expect_linear(host(yt), x, d, with_bias ? &b : nullptr, n, in, out));
    }
  }
};

TEST_F(GptqLinearTest, AwkwardSizesMatchDequantizedReference) {
  for (int64_t n : {1, 3, 17})
    for (int64_t out : {24, 40})
      for (int64_t in : {64, 136}) {
        check(n, out, in, 32, true, false);
        check(n, out, in, -1, true, false);
        check(n, out, in, 32, true, true);
        check(n, out, in, 32, false, false);
      }
}

TEST_F(GptqLinearTest, CpuBackendRunsGptq) {
  EXPECT_TRUE(be_->supports(WeightFormat::gptq_int4));
  EXPECT_TRUE(require_support(*be_, WeightFormat::gptq_int4, "x").ok());
}

TEST(GptqInt4, BadLayoutsNameTensorAndExpectedShape) {
  std::vector<float> wf(24 * 64, 0.25f);
  const GptqTensors t = gptq_quantize_rtn(wf.data(), 24, 64, 32, true, false);
  const std::string name = "model.layers.0.mlp.down_proj";
  auto error_of = [&](const LinearWeight& w) {
    auto st = check_gptq_layout(w, name);
    return st.ok() ? std::string("accepted") : st.error().what();
  };
  LinearWeight w = gptq_host_weight(t, false);
  w.values.shape = {16, 24};  // should be [8, 24]
  EXPECT_NE(error_of(w).find("tensor 'model.layers.0.mlp.down_proj.qweight' is [16, 24] I32, gptq-int4 with "
                             "in 64, out 24, group 32 expects [8, 24] I32"),
            std::string::npos)
      << error_of(w);
  w = gptq_host_weight(t, false);
  w.scales.dtype = DType::bf16;
  EXPECT_NE(error_of(w).find(".scales' is [2, 24] BF16"), std::string::npos) << error_of(w);
  EXPECT_NE(error_of(w).find("expects [2, 24] F16"), std::string::npos) << error_of(w);
  w = gptq_host_weight(t, false);
  w.group_size = 16;  // config says 16: 4 groups expected
  EXPECT_NE(error_of(w).find(".qzeros' is [2, 3] I32"), std::string::npos) << error_of(w);
  EXPECT_NE(error_of(w).find("expects [4, 3] I32"), std::string::npos) << error_of(w);
  GptqTensors bad = t;
  bad.g_idx[5] = 7;
  EXPECT_NE(error_of(gptq_host_weight(bad, true)).find(".g_idx' has group 7 at column 5"), std::string::npos);
  w = gptq_host_weight(t, false);
  w.out = 20;
  EXPECT_NE(error_of(w).find("multiples of 8"), std::string::npos) << error_of(w);
}

}  // namespace
}  // namespace spk::test
