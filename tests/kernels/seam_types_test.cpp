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

// A backend with only the defaults for MLA (as the CUDA backend today): DeepSeek-style models are refused by
// name, with the backend that runs them, and its MLA ops refuse rather than crash.
class NoMlaBackend final : public Backend {
 public:
  std::string_view name() const override { return "gpu-without-mla"; }
  Device device() const override { return Device::cpu; }
  Result<Tensor> alloc(DType, std::vector<int64_t>) override { return Tensor{}; }
  Result<Tensor> import_weight(const void*, DType, std::vector<int64_t>, std::shared_ptr<void>,
                               DType) override {
    return Tensor{};
  }
  Status upload(const Tensor&, const void*, size_t) override { return ok_status(); }
  Status download(const Tensor&, void*, size_t) override { return ok_status(); }
  Status begin_step(const StepMeta&) override { return ok_status(); }
  Status embedding(const Tensor&, const Tensor&, Tensor&) override { return ok_status(); }
  Status rmsnorm(const Tensor&, const Tensor&, float, Tensor&) override { return ok_status(); }
  Status add_rmsnorm(Tensor&, const Tensor&, const Tensor&, float, Tensor&) override { return ok_status(); }
  Status linear(const Tensor&, const LinearWeight&, const Tensor*, Tensor&) override { return ok_status(); }
  Status rope(Tensor&, Tensor&, const Tensor&) override { return ok_status(); }
  Status kv_write(const Tensor&, const Tensor&, KvCache&) override { return ok_status(); }
  Status attention(const Tensor&, const KvCache&, const AttnSpec&, Tensor&) override { return ok_status(); }
  Status silu_mul(const Tensor&, const Tensor&, Tensor&) override { return ok_status(); }
  Status gather_rows(const Tensor&, const Tensor&, Tensor&) override { return ok_status(); }
};

TEST(SeamTypes, MlaIsRefusedByABackendWithoutItNamingMlaAndTheCpuBackend) {
  NoMlaBackend be;
  const Status st = require_support(be, AttnKind::mla, "DeepseekV3ForCausalLM attention");
  ASSERT_FALSE(st.ok());
  const std::string msg = st.error().what();
  for (const char* want : {"DeepseekV3ForCausalLM attention", "mla (multi-head latent attention)",
                           "'gpu-without-mla'", "--backend cpu"})
    EXPECT_NE(msg.find(want), std::string::npos) << want << " in: " << msg;
  Tensor t;
  KvCache c;
  AttnSpec spec;
  EXPECT_FALSE(be.mla_rope(t, t, t, spec).ok());
  EXPECT_FALSE(be.mla_kv_write(t, t, c, spec).ok());
  const Status a = be.mla_attention(t, c, t, spec, t);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(std::string(a.error().what()).find("mla (multi-head latent attention)"), std::string::npos);
}

}  // namespace
