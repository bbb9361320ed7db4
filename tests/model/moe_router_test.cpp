// The MoE router, one hand-computed case per variant (softmax, renormalised, Mixtral's softmax over the
// selected logits, sigmoid with a selection-only bias, routed scaling, grouped top-k), and the config
// facts behind it (which layers are sparse, bad keys refused by name).
#include "runtime/model/moe_router.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "runtime/model/model_config.h"

namespace spk::test {
namespace {

using rt::MoeConfig;
using rt::MoeRouter;

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> w;
};

Routed route(const MoeConfig& c, const std::vector<float>& logits, const std::vector<float>& bias = {}) {
  auto r = MoeRouter::make(c);
  EXPECT_TRUE(r.ok()) << r.error().what();
  const int64_t n = static_cast<int64_t>(logits.size()) / c.num_experts;
  Routed out{std::vector<int32_t>(n * c.top_k), std::vector<float>(n * c.top_k)};
  r->route(logits.data(), n, bias.empty() ? nullptr : bias.data(), out.ids.data(), out.w.data());
  return out;
}

MoeConfig cfg(int experts, int k) {
  MoeConfig c;
  c.num_experts = experts;
  c.top_k = k;
  c.moe_intermediate_size = 8;
  return c;
}

void expect_weights(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "slot " << i;
}

// softmax([1, 2, 3, 0]) = e^x / (1 + e + e^2 + e^3 = 31.19287)
TEST(MoeRouter, SoftmaxTopKWithoutRenormalisation) {
  const Routed r = route(cfg(4, 2), {1, 2, 3, 0});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 1}));
  expect_weights(r.w, {0.6439142599, 0.2368828181});
}

TEST(MoeRouter, NormTopkProbRenormalisesTheSelected) {
  MoeConfig c = cfg(4, 2);
  c.norm_topk_prob = true;
  const Routed r = route(c, {1, 2, 3, 0});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 1}));
  expect_weights(r.w, {0.7310585786, 0.2689414214});  // e^3 / (e^3 + e^2), e^2 / (e^3 + e^2)
}

// Mixtral: top-k of the logits, then softmax over the selected logits only. Same numbers as above.
TEST(MoeRouter, MixtralSoftmaxOverSelectedEqualsRenormalisedSoftmax) {
  const std::vector<float> logits = {0.3f, -1.2f, 2.5f, 0.9f, 2.4f, -0.1f, 1.7f, 0.0f};
  MoeConfig c = cfg(8, 2);
  c.norm_topk_prob = true;
  const Routed r = route(c, logits);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 4}));
  const double a = std::exp(2.5), b = std::exp(2.4);
  expect_weights(r.w, {a / (a + b), b / (a + b)});
}

// sigmoid([0, 1, -1, 2]) = [0.5, 0.7310586, 0.2689414, 0.8807971]; + bias [0, -0.9, 1, 0] for the choice
// = [0.5, -0.1689414, 1.2689414, 0.8807971]: experts 2 and 3 win, weighted by their unbiased scores.
TEST(MoeRouter, SigmoidWithSelectionOnlyBias) {
  MoeConfig c = cfg(4, 2);
  c.score = rt::MoeScore::sigmoid;
  const std::vector<float> logits = {0, 1, -1, 2}, bias = {0, -0.9f, 1, 0};
  Routed r = route(c, logits, bias);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 3}));
  expect_weights(r.w, {0.2689414214, 0.8807970780});
  // Renormalised and scaled (DeepSeek-V3: norm_topk_prob, routed_scaling_factor 2.5).
  c.norm_topk_prob = true;
  c.routed_scaling_factor = 2.5;
  r = route(c, logits, bias);
  expect_weights(r.w, {2.5 * 0.2689414214 / 1.1497384994, 2.5 * 0.8807970780 / 1.1497384994});
  // Without the bias the choice is experts 3 and 1.
  EXPECT_EQ(route(c, logits).ids, (std::vector<int32_t>{3, 1}));
}

// 8 experts in 4 groups of 2, sigmoid scores of [3, -3, 0, 0, 2, 2, -3, 4]:
//   [0.9525741, 0.0474259, 0.5, 0.5, 0.8807971, 0.8807971, 0.0474259, 0.9820138]
// group scores (sum of the top 2): [1.0, 1.0, 1.7615942, 1.0294397] -> groups 2 and 3 stay. Without
// groups the top 2 would be experts 7 and 0; with them 7 and 4 (4 and 5 tie: the lower index wins).
TEST(MoeRouter, GroupedTopKKeepsTheBestGroups) {
  MoeConfig c = cfg(8, 2);
  c.score = rt::MoeScore::sigmoid;
  const std::vector<float> logits = {3, -3, 0, 0, 2, 2, -3, 4};
  EXPECT_EQ(route(c, logits).ids, (std::vector<int32_t>{7, 0}));
  c.n_group = 4;
  c.topk_group = 2;
  const Routed r = route(c, logits);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{7, 4}));
  expect_weights(r.w, {0.9820137900, 0.8807970780});
}

// Several tokens at once route independently (row-major [n, E] in, [n, k] out).
TEST(MoeRouter, RowsAreIndependent) {
  MoeConfig c = cfg(3, 1);
  const Routed r = route(c, {0, 1, 0, /**/ 5, 0, 0, /**/ 0, 0, 7});
  EXPECT_EQ(r.ids, (std::vector<int32_t>{1, 0, 2}));
}

TEST(MoeRouter, GroupSettingsThatDoNotFitAreRefused) {
  MoeConfig c = cfg(8, 2);
  c.n_group = 3;
  auto r = MoeRouter::make(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what().find("n_group = 3 does not divide the 8 experts"), std::string::npos)
      << r.error().what();
  c.n_group = 4;
  c.topk_group = 1;
  c.top_k = 3;  // one group of 2 experts cannot give 3
  r = MoeRouter::make(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().what().find("num_experts_per_tok = 3 exceeds the 2 experts"), std::string::npos)
      << r.error().what();
}

TEST(MoeConfig, SparseLayersFollowTransformersRule) {
  MoeConfig c = cfg(4, 2);
  c.decoder_sparse_step = 2;
  c.mlp_only_layers = {3};
  std::vector<bool> got;
  for (int l = 0; l < 6; ++l) got.push_back(c.is_moe_layer(l));
  EXPECT_EQ(got, (std::vector<bool>{false, true, false, false, false, true}));
  c = cfg(4, 2);
  c.first_k_dense_replace = 2;  // DeepSeek
  EXPECT_FALSE(c.is_moe_layer(1));
  EXPECT_TRUE(c.is_moe_layer(2));
  EXPECT_TRUE(c.has_dense_layers(3));
}

std::string base_config(const std::string& arch) {
  return R"({"architectures": [")" + arch +
         R"("], "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
             "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
             "max_position_embeddings": 128)";
}

TEST(MoeConfig, FamilyDefaultsAreTransformers) {
  auto q3 = rt::parse_model_config(base_config("Qwen3MoeForCausalLM") + "}", "q3/config.json");
  ASSERT_TRUE(q3.ok()) << q3.error().what();
  ASSERT_TRUE(q3->moe.has_value());
  EXPECT_EQ(q3->arch, rt::Arch::qwen3_moe);
  EXPECT_TRUE(q3->qk_norm);
  EXPECT_EQ(q3->moe->num_experts, 128);
  EXPECT_EQ(q3->moe->top_k, 8);
  EXPECT_EQ(q3->moe->moe_intermediate_size, 768);
  EXPECT_FALSE(q3->moe->norm_topk_prob);
  EXPECT_EQ(q3->moe->shared_expert_intermediate_size, 0);

  auto q2 = rt::parse_model_config(base_config("Qwen2MoeForCausalLM") + "}", "q2/config.json");
  ASSERT_TRUE(q2.ok()) << q2.error().what();
  EXPECT_EQ(q2->moe->num_experts, 60);
  EXPECT_EQ(q2->moe->top_k, 4);
  EXPECT_EQ(q2->moe->moe_intermediate_size, 1408);
  EXPECT_EQ(q2->moe->shared_expert_intermediate_size, 5632);
  EXPECT_TRUE(q2->moe->shared_expert_gated);
  EXPECT_TRUE(q2->attention_bias);  // qkv_bias defaults to true

  auto mx = rt::parse_model_config(base_config("MixtralForCausalLM") + "}", "mx/config.json");
  ASSERT_TRUE(mx.ok()) << mx.error().what();
  EXPECT_EQ(mx->moe->num_experts, 8);
  EXPECT_EQ(mx->moe->top_k, 2);
  EXPECT_EQ(mx->moe->moe_intermediate_size, 96);  // experts are intermediate_size wide
  EXPECT_TRUE(mx->moe->norm_topk_prob);
  EXPECT_EQ(mx->moe->naming, rt::MoeNaming::mixtral);

  // transformers 5.17 writes Qwen3-MoE's expert count as num_local_experts.
  auto q3v5 =
      rt::parse_model_config(base_config("Qwen3MoeForCausalLM") + R"(, "num_local_experts": 8})", "v5");
  ASSERT_TRUE(q3v5.ok()) << q3v5.error().what();
  EXPECT_EQ(q3v5->moe->num_experts, 8);

  auto dense = rt::parse_model_config(base_config("Qwen3ForCausalLM") + "}", "d/config.json");
  ASSERT_TRUE(dense.ok()) << dense.error().what();
  EXPECT_FALSE(dense->moe.has_value());
}

TEST(MoeConfig, BadKeysAreNamed) {
  struct Case {
    std::string extra, want;
  } cases[] = {
      {R"("num_experts": 4, "num_experts_per_tok": 5)",
       R"("num_experts_per_tok" (5) exceeds the number of experts (4))"},
      {R"("decoder_sparse_step": 0)", R"("decoder_sparse_step" must be an integer >= 1, got 0)"},
      {R"("mlp_only_layers": [1, 3])",
       R"("mlp_only_layers" entry 3 is not a layer index in [0, num_hidden_layers = 3))"},
      {R"("norm_topk_prob": "yes")", R"("norm_topk_prob" must be true or false)"},
      {R"("num_experts": 8, "num_local_experts": 6)",
       R"("num_experts" (8) disagrees with num_local_experts (6))"},
  };
  for (const auto& k : cases) {
    auto r =
        rt::parse_model_config(base_config("Qwen3MoeForCausalLM") + ", " + k.extra + "}", "m/config.json");
    ASSERT_FALSE(r.ok()) << k.extra;
    EXPECT_NE(r.error().what().find(k.want), std::string::npos) << r.error().what();
    EXPECT_NE(r.error().what().find("m/config.json"), std::string::npos) << r.error().what();
  }
}

}  // namespace
}  // namespace spk::test
