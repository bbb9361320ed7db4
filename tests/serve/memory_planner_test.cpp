// Memory planner: exact log lines, the shortfall message with the GMU that fits, the largest
// max_model_len that fits.
#include "runtime/serve/memory_planner.h"

#include <gtest/gtest.h>

namespace spk::rt {
namespace {

constexpr uint64_t GiB = 1ull << 30;
constexpr uint64_t MiB = 1ull << 20;

MemoryPlanInput base() {
  MemoryPlanInput in;
  in.device_bytes = 10 * GiB;
  in.gpu_memory_utilization = 0.5;
  in.weight_bytes = 2 * GiB;
  in.activation_bytes = 512 * MiB;
  in.graph_bytes = 0;
  in.other_bytes = 512 * MiB;
  in.kv_bytes_per_token = 64 * 1024;  // 64 KiB/token -> 16384 tokens per GiB
  in.block_size = 16;
  in.max_model_len = 4096;
  return in;
}

TEST(MemoryPlanner, ExactLogLines) {
  auto p = plan_memory(base());
  ASSERT_TRUE(p.ok()) << p.error().what();
  // 10 GiB x 0.5 - 2 - 0.5 - 0.5 = 2 GiB -> 32768 tokens -> 8x of 4096.
  EXPECT_EQ(p->available_kv_bytes, static_cast<int64_t>(2 * GiB));
  EXPECT_EQ(p->num_blocks, 2048);
  EXPECT_EQ(p->kv_tokens, 32768);
  auto lines = p->log_lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "Available KV cache memory: 2.00 GiB");
  EXPECT_EQ(lines[1], "KV cache size: 32768 tokens");
  EXPECT_EQ(lines[2], "Maximum concurrency for 4096 tokens per request: 8.00x");
  auto j = p->to_json();
  EXPECT_EQ(j["num_blocks"], 2048);
  EXPECT_EQ(j["log"][1], "KV cache size: 32768 tokens");
}

TEST(MemoryPlanner, PartialBlocksAreDropped) {
  auto in = base();
  in.gpu_memory_utilization = 0.3001;  // 3.001 GiB - 3 GiB = ~1 MiB -> 16 tokens -> 1 block of 16
  in.max_model_len = 16;
  auto p = plan_memory(in);
  ASSERT_TRUE(p.ok()) << p.error().what();
  EXPECT_EQ(p->num_blocks, 1);
  EXPECT_EQ(p->kv_tokens, 16);
}

TEST(MemoryPlanner, NegativeBudgetNamesShortfallAndTheGmuThatFits) {
  auto in = base();
  in.gpu_memory_utilization = 0.29;  // 2.9 GiB - 3 GiB = -0.1 GiB
  auto p = plan_memory(in);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("short by 0.10 GiB"), std::string::npos) << p.error().what();
  // One 4096-token request needs 0.25 GiB on top of 3 GiB: 3.25/10 = 0.325.
  EXPECT_NE(p.error().fix.find("--gpu-memory-utilization >= 0.325"), std::string::npos) << p.error().what();
  // And that GMU really boots.
  in.gpu_memory_utilization = 0.325;
  auto ok = plan_memory(in);
  ASSERT_TRUE(ok.ok()) << ok.error().what();
  EXPECT_GE(ok->kv_tokens, 4096);
}

TEST(MemoryPlanner, ShortfallIsNeverUnderstated) {
  auto in = base();
  in.gpu_memory_utilization = 0.2999;  // short by 0.001 GiB: shows 0.01, not 0.00
  auto p = plan_memory(in);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().message.find("short by 0.01 GiB"), std::string::npos) << p.error().what();
}

TEST(MemoryPlanner, TooLongMaxModelLenNamesTheLargestThatFits) {
  auto in = base();
  in.gpu_memory_utilization = 0.31;  // 0.1 GiB = 1638.4 tokens -> 102 blocks -> 1632 tokens
  auto p = plan_memory(in);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().fix.find("--max-model-len <= 1632"), std::string::npos) << p.error().what();
  EXPECT_NE(p.error().fix.find("--gpu-memory-utilization >= 0.325"), std::string::npos) << p.error().what();
  in.max_model_len = 1632;
  auto ok = plan_memory(in);
  ASSERT_TRUE(ok.ok()) << ok.error().what();
  EXPECT_EQ(ok->kv_tokens, 1632);
  in.max_model_len = 1633;
  EXPECT_FALSE(plan_memory(in).ok());
}

TEST(MemoryPlanner, NothingFitsSaysSo) {
  auto in = base();
  in.weight_bytes = 20 * GiB;
  auto p = plan_memory(in);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().fix.find("no --gpu-memory-utilization fits"), std::string::npos) << p.error().what();
}

TEST(MemoryPlanner, RejectsBadInputs) {
  auto in = base();
  in.gpu_memory_utilization = 1.3;
  EXPECT_FALSE(plan_memory(in).ok());
  in = base();
  in.device_bytes = 0;
  auto p = plan_memory(in);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().fix.find("--device-memory-gib"), std::string::npos);
}

}  // namespace
}  // namespace spk::rt
