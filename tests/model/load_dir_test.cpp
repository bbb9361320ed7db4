// (d) Each architecture loads from a HF-layout directory (config.json + model.safetensors, bf16 as
// checkpoints ship) and runs; unknown architectures are refused by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "kernels/base/fs.h"
#include "random_model.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/model/model.h"

namespace spk::test {
namespace {

namespace fs = std::filesystem;

class LoadDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spk_model_load_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_model(const rt::ModelConfig& c, const rt::MemoryWeights& w,
                   const std::vector<std::string>& names) {
    std::vector<rt::TensorSpec> specs;
    for (const auto& n : names) {
      auto hw = w.get(n);
      ASSERT_TRUE(hw.ok());
      specs.push_back({n, hw->dtype, hw->shape});
    }
    auto st = rt::write_safetensors((dir_ / "model.safetensors").string(), specs,
                                    [&](const rt::TensorSpec& s, uint8_t* dst, uint64_t nbytes) {
                                      std::memcpy(dst, w.get(s.name)->data, nbytes);
                                    });
    ASSERT_TRUE(st.ok()) << st.error().what();
    ASSERT_TRUE(write_file_atomic((dir_ / "config.json").string(), config_json(c)).ok());
  }

  fs::path dir_;
};

std::vector<std::string> names_of(const rt::ModelConfig& c) {
  std::vector<std::string> n = {"model.embed_tokens.weight", "model.norm.weight"};
  if (!c.tie_word_embeddings) n.push_back("lm_head.weight");
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    for (const char* s :
         {".input_layernorm.weight", ".post_attention_layernorm.weight", ".self_attn.q_proj.weight",
          ".self_attn.k_proj.weight", ".self_attn.v_proj.weight", ".self_attn.o_proj.weight",
          ".mlp.gate_proj.weight", ".mlp.up_proj.weight", ".mlp.down_proj.weight"})
      n.push_back(p + s);
    if (c.attention_bias)
      for (const char* s : {".self_attn.q_proj.bias", ".self_attn.k_proj.bias", ".self_attn.v_proj.bias"})
        n.push_back(p + s);
    if (c.qk_norm)
      for (const char* s : {".self_attn.q_norm.weight", ".self_attn.k_norm.weight"}) n.push_back(p + s);
  }
  return n;
}

TEST_F(LoadDirTest, EveryArchitectureLoadsAndRuns) {
  for (rt::Arch arch : {rt::Arch::llama, rt::Arch::mistral, rt::Arch::qwen2, rt::Arch::qwen3}) {
    SCOPED_TRACE(rt::arch_name(arch));
    const auto cfg = small_config(arch);
    auto w = random_weights(cfg, 7);
    write_model(cfg, *w, names_of(cfg));
    auto m = rt::Model::load(dir_.string(), {.threads = 2});
    ASSERT_TRUE(m.ok()) << m.error().what();
    EXPECT_EQ((*m)->config().arch, arch);
    EXPECT_GT((*m)->weight_bytes(), 0u);
    ASSERT_TRUE((*m)->allocate_kv(4, 8).ok());
    rt::StepBatch b;
    b.tokens = {3, 1, 4, 1, 5};
    b.positions = {0, 1, 2, 3, 4};
    b.seqs = {{0, 5, 5, {2}}};
    b.logit_rows = {4};
    std::vector<float> logits;
    auto st = (*m)->forward(b, logits);
    ASSERT_TRUE(st.ok()) << st.error().what();
    // Same numbers as the naive reference over the same (file-backed) weights.
    const auto want = ref::forward(cfg, *w, b.tokens)[4];
    double mx = 0, err = 0;
    for (int v = 0; v < cfg.vocab_size; ++v) {
      mx = std::max(mx, std::fabs(want[v]));
      err = std::max(err, std::fabs(logits[v] - want[v]));
    }
    EXPECT_LE(err / mx, 1e-5);
  }
}

TEST_F(LoadDirTest, UnknownArchitectureIsRefusedByName) {
  auto cfg = small_config(rt::Arch::llama);
  auto w = random_weights(cfg, 7);
  write_model(cfg, *w, names_of(cfg));
  std::string text = config_json(cfg);
  text.replace(text.find("LlamaForCausalLM"), 16, "GPTNeoXForCausalLM");
  ASSERT_TRUE(write_file_atomic((dir_ / "config.json").string(), text).ok());
  auto m = rt::Model::load(dir_.string(), {});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("GPTNeoXForCausalLM"), std::string::npos) << m.error().what();
}

TEST_F(LoadDirTest, UntiedModelWithoutLmHeadIsRefused) {
  auto cfg = small_config(rt::Arch::qwen2);
  auto w = random_weights(cfg, 7);
  auto names = names_of(cfg);
  names.erase(std::find(names.begin(), names.end(), "lm_head.weight"));
  write_model(cfg, *w, names);
  auto m = rt::Model::load(dir_.string(), {});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("lm_head.weight"), std::string::npos) << m.error().what();
}

}  // namespace
}  // namespace spk::test
