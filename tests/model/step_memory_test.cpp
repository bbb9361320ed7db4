// The memory plan on the CPU backend (issues 42, 44): activations planned from what a step allocates
// (logits only for the sampled rows), reserved before the KV pool, nothing allocated after it; dense, MoE,
// MLA and a vocabulary-sized regression.
#include <gtest/gtest.h>

#include <random>

#include "runtime/model/model.h"
#include "tests/model/random_mla_model.h"
#include "tests/model/step_memory_check.h"

namespace spk::test {
namespace {

std::unique_ptr<rt::Model> load_cpu(const rt::ModelConfig& c, std::shared_ptr<rt::WeightSource> w) {
  auto m = rt::Model::load(c, std::move(w), {.backend = "cpu", .threads = 2});
  EXPECT_TRUE(m.ok()) << m.error().what();
  return m.ok() ? std::move(*m) : nullptr;
}

TEST(StepMemory, DenseStepsAllocateNothingAfterThePool) {
  for (rt::Arch arch : {rt::Arch::llama, rt::Arch::qwen3}) {
    const rt::ModelConfig c = small_config(arch);
    const uint64_t seed = std::random_device{}();
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto m = load_cpu(c, random_weights(c, seed));
    ASSERT_TRUE(m);
    const StepMemoryFigures f = check_step_memory(*m, {111, 19, 160, 16});
    EXPECT_GT(f.reserved, 0u);
  }
}

TEST(StepMemory, MixtureOfExpertsStepsAllocateNothingAfterThePool) {
  for (rt::Arch arch : {rt::Arch::qwen3_moe, rt::Arch::qwen2_moe, rt::Arch::mixtral}) {
    const rt::ModelConfig c = small_moe_config(arch);
    const uint64_t seed = std::random_device{}();
    SCOPED_TRACE("seed " + std::to_string(seed));
    auto m = load_cpu(c, random_moe_weights(c, seed));
    ASSERT_TRUE(m);
    check_step_memory(*m, {89, 7, 128, 16});
  }
}

// DeepSeek-V3: the MLA buffers (q, q_a, latent, k_pe, out) are planned and reserved with the rest; the
// latent pool and the reference path's per-call host scratch are outside the backend's counters.
TEST(StepMemory, MlaStepsAllocateNothingAfterThePool) {
  for (bool q_lora : {true, false}) {
    MlaVariant v;
    v.q_lora = q_lora;
    const rt::ModelConfig c = small_mla_config(v);
    auto m = load_cpu(c, random_mla_weights(c, 11));
    ASSERT_TRUE(m);
    check_step_memory(*m, {89, 7, 128, 16});
  }
}

// Issue 42: a 20 MB-class model with Qwen3's vocabulary planned 4.65 GiB of activations at 8192 batched
// tokens (a full row of logits per batched token). Logits are per sampled row (max_num_seqs): the per-token
// cost must not grow with the vocabulary.
TEST(StepMemory, LogitsArePlannedPerSampledRowNotPerBatchedToken) {
  rt::ModelConfig c = small_config(rt::Arch::qwen3);
  c.vocab_size = 151669;
  auto m = load_cpu(c, random_weights(c, 5));
  ASSERT_TRUE(m);
  const uint64_t small = m->activation_bytes({512, 256, 2048, 16});
  const uint64_t big = m->activation_bytes({8192, 256, 2048, 16});
  const uint64_t per_token = (big - small) / (8192 - 512);
  EXPECT_LT(per_token, 4ull * 1024) << "bytes per batched token grew with the vocabulary";
  EXPECT_LT(big, 512ull << 20) << "8192 batched tokens plan " << big << " bytes for a tiny model";
  // Logit rows scale with max_num_seqs: about one fp32 vocabulary row each.
  const uint64_t more_seqs = m->activation_bytes({8192, 512, 2048, 16});
  EXPECT_GE(more_seqs - big, 256ull * 4 * c.vocab_size);
  EXPECT_LT(more_seqs - big, 256ull * 4 * (c.vocab_size + 4096));
}

}  // namespace
}  // namespace spk::test
