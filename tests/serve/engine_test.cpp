// Engine: batching never changes greedy results (with chunked prefill and preemption in play), token
// counts, stop tokens, abort frees blocks.
#include "runtime/serve/engine.h"

#include <gtest/gtest.h>

#include "tests/serve/fakes.h"

namespace spk::rt {
namespace {

using testing::ByteTokenizer;
using testing::HashModel;

using Result1 = testing::Drained;
using testing::drain;

SamplingParams greedy(int max_tokens) {
  SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  return p;
}

std::vector<int32_t> prompt(int i) {
  ByteTokenizer t;
  std::string s = "prompt number " + std::to_string(i) + std::string(static_cast<size_t>(i * 7 % 40), 'x');
  return t.encode(s, true);
}

EngineConfig cfg(int seqs, int tokens) {
  EngineConfig c;
  c.sched = {seqs, tokens};
  c.max_model_len = 256;
  c.eos_ids = {ByteTokenizer::kEos};
  return c;
}

TEST(Engine, ConcurrentGreedyEqualsSingleUnderChunkingAndPreemption) {
  const int N = 24, gen = 40;
  std::vector<std::vector<int32_t>> single(N);
  {
    HashModel m;
    ASSERT_TRUE(m.allocate_kv(64, 16).ok());
    Engine e(m, cfg(1, 4096), nullptr);
    e.start();
    for (int i = 0; i < N; ++i) {
      auto s = e.submit({prompt(i), greedy(gen), false});
      ASSERT_TRUE(s.ok()) << s.error().what();
      auto r = drain(*s->channel);
      ASSERT_EQ(r.error, "");
      ASSERT_EQ(r.tokens.size(), static_cast<size_t>(gen));
      EXPECT_EQ(r.finish, FinishReason::length);
      single[static_cast<size_t>(i)] = r.tokens;
    }
  }
  HashModel m;
  ASSERT_TRUE(m.allocate_kv(24, 4).ok());  // 96 tokens for 24 sequences of ~60-100: constant preemption
  Engine e(m, cfg(16, 32), nullptr);       // 32-token steps: prompts are prefilled in chunks
  e.start();
  std::vector<Submitted> subs;
  for (int i = 0; i < N; ++i) {
    auto s = e.submit({prompt(i), greedy(gen), false});
    ASSERT_TRUE(s.ok()) << s.error().what();
    subs.push_back(*s);
  }
  for (int i = 0; i < N; ++i) {
    auto r = drain(*subs[static_cast<size_t>(i)].channel);
    ASSERT_EQ(r.error, "") << "seq " << i;
    EXPECT_EQ(r.tokens, single[static_cast<size_t>(i)]) << "seq " << i << " differs when batched";
  }
  EXPECT_GT(e.gauges().preemptions, 0u);
  EXPECT_GT(m.max_batch_seqs.load(), 1);
}

TEST(Engine, StopTokenIsCountedButNotEmitted) {
  HashModel m;
  ASSERT_TRUE(m.allocate_kv(64, 16).ok());
  Engine e(m, cfg(4, 256), nullptr);
  e.start();
  auto first = e.submit({prompt(1), greedy(3), false});
  ASSERT_TRUE(first.ok());
  auto r1 = drain(*first->channel);
  ASSERT_EQ(r1.tokens.size(), 3u);
  auto p = greedy(10);
  p.stop_token_ids = {r1.tokens[1]};
  auto s = e.submit({prompt(1), p, false});
  ASSERT_TRUE(s.ok());
  auto r = drain(*s->channel);
  EXPECT_EQ(r.finish, FinishReason::stop);
  EXPECT_EQ(r.num_generated, 2);
  EXPECT_EQ(r.tokens, std::vector<int32_t>{r1.tokens[0]});
}

TEST(Engine, AbortFreesTheSequence) {
  HashModel m(5);  // 5 ms per step
  ASSERT_TRUE(m.allocate_kv(64, 16).ok());
  Engine e(m, cfg(4, 256), nullptr);
  e.start();
  auto s = e.submit({prompt(2), greedy(200), false});
  ASSERT_TRUE(s.ok());
  SeqUpdate u;
  ASSERT_TRUE(s->channel->take(u, std::chrono::seconds(5)));
  e.abort(s->id);
  auto r = drain(*s->channel);
  EXPECT_EQ(r.error, "aborted");
  for (int i = 0; i < 100 && e.gauges().kv_usage > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(e.gauges().kv_usage, 0.0);
  EXPECT_EQ(e.gauges().running, 0);
}

TEST(Engine, RefusesPromptsThatCannotFit) {
  HashModel m;
  ASSERT_TRUE(m.allocate_kv(64, 16).ok());
  Engine e(m, cfg(4, 256), nullptr);
  e.start();
  EXPECT_FALSE(e.submit({{}, greedy(1), false}).ok());
  EXPECT_FALSE(e.submit({std::vector<int32_t>(256, 65), greedy(1), false}).ok());
}

// --scripted-output repeated: the i-th scripted sequence emits the i-th output, the last repeats; a
// sequence submitted with scripted = false (warmup) samples and takes no turn.
TEST(Engine, ScriptedOutputsAnswerSuccessiveSequencesInTurn) {
  HashModel m;
  ASSERT_TRUE(m.allocate_kv(64, 16).ok());
  EngineConfig c = cfg(4, 256);
  c.scripted_outputs = {{'a', 'b'}, {'c'}};
  Engine e(m, c, nullptr);
  e.start();
  auto next = [&](bool scripted) {
    auto s = e.submit({prompt(1), greedy(8), false, scripted});
    EXPECT_TRUE(s.ok());
    return s.ok() ? drain(*s->channel) : testing::Drained{};
  };
  const auto warm = next(false);
  EXPECT_EQ(warm.tokens.size(), 8u);  // sampled to max_tokens, not scripted
  const auto first = next(true), second = next(true), third = next(true);
  EXPECT_EQ(first.tokens, (std::vector<int32_t>{'a', 'b'}));
  EXPECT_EQ(first.finish, FinishReason::stop);
  EXPECT_EQ(second.tokens, (std::vector<int32_t>{'c'}));
  EXPECT_EQ(third.tokens, (std::vector<int32_t>{'c'}));
}

}  // namespace
}  // namespace spk::rt
