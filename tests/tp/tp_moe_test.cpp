// Tensor-parallel mixture-of-experts models on the CPU backend, one rank per thread over Gloo on
// loopback: every expert sharded along its intermediate dimension, one all-reduce per MoE layer. For
// Qwen3-MoE, Qwen2-MoE (gated shared expert), Mixtral and DeepSeek-V3 (MLA by heads), in both layouts, TP=2
// and TP=4 give the same greedy tokens as TP=1 and logits within 1e-4 relative (a prefill of several
// sequences with every row's logits, then greedy decode steps).
#include <gtest/gtest.h>

#include <algorithm>

#include "runtime/dist/process_group.h"
#include "runtime/model/model.h"
#include "tests/model/random_mla_model.h"
#include "tests/tp/tp_test_util.h"

namespace spk::test {
namespace {

using rt::Arch;

struct Trace {
  std::vector<std::vector<float>> logits;  // per step
  std::vector<int32_t> tokens;             // greedy tokens, all sequences, step after step
};

int32_t argmax(const float* p, int n) { return static_cast<int32_t>(std::max_element(p, p + n) - p); }

// Two sequences (lengths 11 and 6): one prefill step with every row's logits, then 4 greedy decode steps.
Result<Trace> run(rt::Model& m) {
  const int V = m.config().vocab_size, bs = 4;
  SPK_TRY(m.allocate_kv(16, bs));
  std::vector<std::vector<int32_t>> seqs = {{1, 5, 9, 2, 33, 7, 8, 90, 12, 3, 4}, {60, 61, 2, 2, 9, 96}};
  Trace t;
  bool prefill = true;
  for (int step = 0; step < 5; ++step) {
    rt::StepBatch b;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int len = static_cast<int>(seqs[s].size());
      const int from = prefill ? 0 : len - 1;
      rt::SeqSlice sl;
      sl.q_start = static_cast<int32_t>(b.tokens.size());
      sl.q_len = len - from;
      sl.ctx_len = len;
      for (int i = 0; i < (len + bs - 1) / bs; ++i) sl.block_table.push_back(static_cast<int32_t>(s) * 8 + i);
      for (int p = from; p < len; ++p) {
        if (prefill || p == len - 1) b.logit_rows.push_back(static_cast<int32_t>(b.tokens.size()));
        b.tokens.push_back(seqs[s][p]);
        b.positions.push_back(p);
      }
      b.seqs.push_back(std::move(sl));
    }
    std::vector<float> logits;
    SPK_TRY(m.forward(b, logits));
    // The last logit row of each sequence picks its next token.
    size_t row = 0;
    for (size_t s = 0; s < seqs.size(); ++s) {
      row += prefill ? seqs[s].size() : 1;
      const int32_t tok = argmax(logits.data() + (row - 1) * V, V);
      t.tokens.push_back(tok);
      seqs[s].push_back(tok);
    }
    t.logits.push_back(std::move(logits));
    prefill = false;
  }
  return t;
}

double max_rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double mx = 0, err = 0;
  for (size_t i = 0; i < want.size(); ++i) mx = std::max(mx, std::fabs(double(want[i])));
  for (size_t i = 0; i < want.size(); ++i) err = std::max(err, std::fabs(double(got[i]) - want[i]));
  return err / std::max(mx, 1e-30);
}

// TP=2 and TP=4 of `cfg` give TP=1's greedy tokens and logits within 1e-4 relative.
void expect_worlds_match_one_rank(const rt::ModelConfig& cfg,
                                  const std::shared_ptr<rt::WeightSource>& weights, const std::string& name) {
  auto single = rt::Model::load(cfg, weights, {.threads = 1});
  ASSERT_TRUE(single.ok()) << single.error().what();
  auto want = run(**single);
  ASSERT_TRUE(want.ok()) << want.error().what();

  for (int world : {2, 4}) {
    SCOPED_TRACE(name + " world " + std::to_string(world));
    std::vector<Trace> got(world);
    const auto errors = run_world(world, [&](int r, rt::dist::Communicator& comm) -> Status {
      auto m = rt::Model::load(cfg, weights, {.tp_rank = r, .tp_world = world, .threads = 1, .comm = &comm});
      if (!m.ok()) return m.error();
      auto t = run(**m);
      if (!t.ok()) return t.error();
      got[r] = std::move(*t);
      float done = 1;
      (void)comm.all_reduce_sum(&done, 1, nullptr);
      return ok_status();
    });
    ASSERT_TRUE(errors.empty()) << errors.front();
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(got[r].tokens, want->tokens) << "rank " << r;
      ASSERT_EQ(got[r].logits.size(), want->logits.size());
      for (size_t s = 0; s < want->logits.size(); ++s)
        EXPECT_LT(max_rel_err(got[r].logits[s], want->logits[s]), 1e-4) << "rank " << r << " step " << s;
    }
  }
}

class TpMoeTest : public ::testing::TestWithParam<std::tuple<Arch, bool>> {};

TEST_P(TpMoeTest, WorldsTwoAndFourMatchOneRank) {
  const auto [arch, fused] = GetParam();
  const rt::ModelConfig cfg = small_moe_config(arch);
  expect_worlds_match_one_rank(cfg, random_moe_weights(cfg, 1234, fused),
                               std::string(rt::arch_name(arch)) + (fused ? " fused" : ""));
}

// DeepSeek-V3: MLA sharded by heads (q_b / q_proj and kv_b column-parallel, o_proj row-parallel, the latent
// replicated), experts and the shared expert along their intermediate dimension.
TEST(TpMla, DeepseekV3WorldsTwoAndFourMatchOneRank) {
  for (bool q_lora : {true, false}) {
    MlaVariant v;
    v.q_lora = q_lora, v.bias = !q_lora;
    const rt::ModelConfig cfg = small_mla_config(v);
    expect_worlds_match_one_rank(cfg, random_mla_weights(cfg, 77, !q_lora),
                                 q_lora ? "deepseek_v3 q_lora" : "deepseek_v3 q_proj fused");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Archs, TpMoeTest,
    ::testing::Combine(::testing::Values(Arch::qwen3_moe, Arch::qwen2_moe, Arch::mixtral), ::testing::Bool()),
    [](const auto& i) {
      return std::string(rt::arch_name(std::get<0>(i.param))) +
             (std::get<1>(i.param) ? "_fused" : "_per_expert");
    });

TEST(TpMoe, ExpertWidthThatDoesNotDivideIsRefusedByName) {
  rt::ModelConfig cfg = small_moe_config(Arch::qwen2_moe);
  cfg.moe->moe_intermediate_size = 14;  // 14 / 4 does not divide
  auto comm = rt::dist::make_single_communicator();
  auto m =
      rt::Model::load(cfg, random_moe_weights(cfg, 1), {.tp_rank = 0, .tp_world = 4, .comm = comm.get()});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(
      m.error().what().find("moe_intermediate_size = 14 is not divisible by the tensor-parallel world 4"),
      std::string::npos)
      << m.error().what();
}

}  // namespace
}  // namespace spk::test
