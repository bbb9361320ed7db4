// The seam's variant types (kernels/formats, kernels/kv, kernels/attention): names, byte counts, and the
// load-time refusal of a variant a backend does not run.
#include <gtest/gtest.h>

#include "kernels/backend.h"

namespace {

using namespace spk;

TEST(SeamTypes, KvSpecCountsBytesPerTokenFromItsFormat) {
  KvSpec s;
  s.kv_heads = 8, s.head_dim = 128, s.layers = 32, s.block_size = 16;
  s.format = KvFormat::bf16;
  EXPECT_EQ(s.bytes_per_token(), 2ull * 8 * 128 * 2 * 32);  // K and V, bf16, 32 layers: Llama-3-8B's 128 KiB
  EXPECT_EQ(s.block_bytes(), s.bytes_per_token() * 16);
  s.format = KvFormat::f32;
  EXPECT_EQ(s.bytes_per_token(), 2ull * 8 * 128 * 4 * 32);
  EXPECT_EQ(kv_element_dtype(KvFormat::bf16), DType::bf16);
}

TEST(SeamTypes, KvFormatNamesRoundTrip) {
  for (KvFormat f : kAllKvFormats) EXPECT_EQ(parse_kv_format(kv_format_name(f)), f);
  EXPECT_EQ(parse_kv_format("bfloat16"), KvFormat::bf16);
  EXPECT_FALSE(parse_kv_format("fp9").has_value());
}

TEST(SeamTypes, AttnSpecWindowZeroIsCausal) {
  EXPECT_EQ(AttnSpec::windowed(0.5f, 0).kind, AttnKind::causal);
  const AttnSpec s = AttnSpec::windowed(0.5f, 4096);
  EXPECT_EQ(s.kind, AttnKind::sliding);
  EXPECT_EQ(s.window(), 4096);
  EXPECT_EQ(AttnSpec::causal(1.0f).window(), 0);
  EXPECT_EQ(attn_kind_name(AttnKind::sliding), "sliding-window");
}

TEST(SeamTypes, LinearWeightFromADenseTensor) {
  Tensor t;
  t.dtype = DType::bf16;
  t.shape = {24, 40};
  const LinearWeight w = t;
  EXPECT_EQ(w.format, WeightFormat::dense);
  EXPECT_EQ(w.out, 24);
  EXPECT_EQ(w.in, 40);
  EXPECT_EQ(w.bytes(), 24u * 40 * 2);
  EXPECT_EQ(describe(w), "[24, 40] BF16");
  LinearWeight q;
  q.format = WeightFormat::gptq_int4, q.out = 4096, q.in = 11008, q.group_size = 128;
  EXPECT_EQ(describe(q), "gptq-int4 [4096 x 11008] group 128");
}

// A backend that runs dense weights and f32 KV only: what every refusal of a variant looks like.
TEST(SeamTypes, UnsupportedVariantsAreRefusedNamingVariantAndBackend) {
  auto be = make_backend({"cpu", 1});
  ASSERT_TRUE(be.ok());
  EXPECT_TRUE(require_support(**be, WeightFormat::dense, "w").ok());
  EXPECT_TRUE(require_support(**be, (*be)->kv_format(), "kv").ok());
  for (AttnKind k : kAllAttnKinds) EXPECT_TRUE(require_support(**be, k, "attn").ok());
  // The CPU reference runs every weight format this build knows (it is every device backend's twin).
  for (WeightFormat f : kAllWeightFormats)
    if (!(*be)->supports(f)) {
      const Status st = require_support(**be, f, "model.layers.0.mlp.down_proj");
      ASSERT_FALSE(st.ok());
      const std::string msg = st.error().what();
      EXPECT_NE(msg.find("model.layers.0.mlp.down_proj"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string(weight_format_name(f))), std::string::npos) << msg;
      EXPECT_NE(msg.find("'cpu'"), std::string::npos) << msg;
    }
  const Status st = require_support(**be, KvFormat::bf16, "the KV cache");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.error().what()).find("KV cache format 'bf16'"), std::string::npos)
      << st.error().what();
}

}  // namespace
