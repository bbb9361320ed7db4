// Tensor-parallel shard plan: every head, KV head, MLP column and vocab row is owned exactly once
// (or replicated as documented), and impossible worlds are refused naming the head count and world.
#include "runtime/model/tp_shard.h"

#include <gtest/gtest.h>

#include <vector>

namespace spk::rt {
namespace {

ModelConfig cfg(int heads, int kv, int inter = 64, int vocab = 259) {
  ModelConfig c;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv;
  c.intermediate_size = inter;
  c.vocab_size = vocab;
  return c;
}

TEST(TpShard, SplitCoversEveryIndexOnce) {
  for (int world : {1, 2, 4}) {
    const ModelConfig c = cfg(8, 4);
    std::vector<int> q(8), kv(4), mlp(64), vocab(259);
    for (int r = 0; r < world; ++r) {
      auto p = plan_tp_shard(c, r, world);
      ASSERT_TRUE(p.ok()) << p.error().what();
      EXPECT_EQ(p.value().kv_replicas, 1);
      for (int i = 0; i < p.value().q_heads.count; ++i) ++q[p.value().q_heads.begin + i];
      for (int i = 0; i < p.value().kv_heads.count; ++i) ++kv[p.value().kv_heads.begin + i];
      for (int i = 0; i < p.value().mlp.count; ++i) ++mlp[p.value().mlp.begin + i];
      for (int i = 0; i < p.value().vocab.count; ++i) ++vocab[p.value().vocab.begin + i];
    }
    for (auto* v : {&q, &kv, &mlp, &vocab})
      for (int n : *v) EXPECT_EQ(n, 1) << "world " << world;
  }
}

TEST(TpShard, ReplicatesKvHeadsWhenWorldIsAMultiple) {
  const ModelConfig c = cfg(8, 2);
  for (int r = 0; r < 4; ++r) {
    auto p = plan_tp_shard(c, r, 4);
    ASSERT_TRUE(p.ok()) << p.error().what();
    EXPECT_EQ(p.value().kv_replicas, 2);
    EXPECT_EQ(p.value().kv_heads.begin, r / 2);
    EXPECT_EQ(p.value().kv_heads.count, 1);
  }
}

TEST(TpShard, RefusesImpossibleWorldsNamingCounts) {
  auto heads = plan_tp_shard(cfg(6, 6), 0, 4);
  ASSERT_FALSE(heads.ok());
  EXPECT_NE(heads.error().message.find("num_attention_heads = 6"), std::string::npos) << heads.error().what();
  EXPECT_NE(heads.error().message.find("world 4"), std::string::npos);
  auto kv = plan_tp_shard(cfg(12, 3), 0, 4);
  ASSERT_FALSE(kv.ok());
  EXPECT_NE(kv.error().message.find("num_key_value_heads = 3"), std::string::npos) << kv.error().what();
  EXPECT_FALSE(kv.error().fix.empty());
  auto rank = plan_tp_shard(cfg(8, 4), 2, 2);
  ASSERT_FALSE(rank.ok());
  EXPECT_NE(rank.error().fix.find("--rank"), std::string::npos);
}

}  // namespace
}  // namespace spk::rt
