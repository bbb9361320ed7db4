// Engine with automatic prefix caching over the fake model that reads every context token back from its
// paged KV pool (fakes.h): a reused block holding anything but the right tokens changes the output or
// fails the step. A second request with the same long prefix reports cached tokens (a multiple of
// block_size) and generates exactly the tokens the engine generates with caching off; a different prefix
// reports 0; the cache outlives the request that filled it; a small pool evicts and stays correct, also
// under concurrency and preemption; /metrics counts queries and hits.
#include <gtest/gtest.h>

#include <thread>

#include "runtime/serve/engine.h"
#include "tests/serve/fakes.h"

namespace spk::rt {
namespace {

using testing::ByteTokenizer;
using testing::HashModel;

using Out = testing::Drained;
using testing::drain;

std::vector<int32_t> text(const std::string& s) { return ByteTokenizer().encode(s, true); }

// A long shared "system prompt + tools" prefix of `n` tokens (with <bos>).
std::string prefix(int n) {
  std::string s;
  for (int i = 0; static_cast<int>(s.size()) < n - 1; ++i) s += "tool_" + std::to_string(i) + ";";
  return s.substr(0, static_cast<size_t>(n - 1));
}

class PrefixEngine {
 public:
  PrefixEngine(bool caching, int blocks, int block_size, int seqs = 4, int step_tokens = 64,
               Metrics* metrics = nullptr) {
    EXPECT_TRUE(model_.allocate_kv(blocks, block_size).ok());
    EngineConfig c;
    c.sched = {seqs, step_tokens};
    c.max_model_len = 256;
    c.eos_ids = {ByteTokenizer::kEos};
    c.enable_prefix_caching = caching;
    engine_ = std::make_unique<Engine>(model_, c, metrics);
    engine_->start();
  }
  Submitted submit(const std::vector<int32_t>& prompt, int max_tokens) {
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = max_tokens;
    auto s = engine_->submit({prompt, p, false});
    EXPECT_TRUE(s.ok()) << s.error().what();
    return *s;
  }
  Out run(const std::vector<int32_t>& prompt, int max_tokens) {
    return drain(*submit(prompt, max_tokens).channel);
  }
  Engine& engine() { return *engine_; }

 private:
  HashModel model_;
  std::unique_ptr<Engine> engine_;
};

TEST(EnginePrefixCache, SecondRequestWithTheSamePrefixReusesBlocksAndGeneratesTheSameTokens) {
  const std::string sys = prefix(90);  // <bos> + 89 bytes: 5 full blocks of 16, the 6th ends in the tail
  const auto a = text(sys + "Q: first question?"), b = text(sys + "Q: another one");
  PrefixEngine off(false, 64, 16);
  const Out ra0 = off.run(a, 24), rb0 = off.run(b, 24);
  ASSERT_EQ(ra0.error, "");
  ASSERT_EQ(rb0.error, "");
  EXPECT_EQ(ra0.cached, 0);
  EXPECT_EQ(rb0.cached, 0);  // caching off: nothing is ever reused

  Metrics metrics;
  PrefixEngine on(true, 64, 16, 4, 64, &metrics);
  const Out ra = on.run(a, 24);
  const Out rb = on.run(b, 24);  // a has finished: its blocks are cached, unreferenced
  ASSERT_EQ(ra.error, "");
  ASSERT_EQ(rb.error, "");
  EXPECT_EQ(ra.cached, 0);
  EXPECT_EQ(rb.cached, 80);  // the 5 full blocks the prompts share; the 6th differs
  EXPECT_EQ(rb.cached % 16, 0);
  EXPECT_EQ(ra.tokens, ra0.tokens);
  EXPECT_EQ(rb.tokens, rb0.tokens);

  // The same prompt again: every full block but the one holding the last prompt token.
  const Out ra2 = on.run(a, 24);
  EXPECT_EQ(ra2.cached, (static_cast<int>(a.size()) - 1) / 16 * 16);
  EXPECT_EQ(ra2.tokens, ra0.tokens);

  // vLLM's counters: prompt tokens queried and found, at each request's first admission.
  const std::string m = metrics.render("m");
  const std::string lbl = "{model_name=\"m\",engine=\"0\"} ";
  EXPECT_NE(m.find("vllm:prefix_cache_queries_total" + lbl + std::to_string(2 * a.size() + b.size())),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("vllm:prefix_cache_hits_total" + lbl + std::to_string(80 + ra2.cached)), std::string::npos)
      << m;
}

TEST(EnginePrefixCache, ADifferentPrefixReportsZero) {
  PrefixEngine on(true, 64, 16);
  const Out r1 = on.run(text(prefix(90) + "tail"), 8);
  const Out r2 = on.run(text("something else entirely, " + prefix(90)), 8);
  ASSERT_EQ(r2.error, "");
  EXPECT_EQ(r1.cached, 0);
  EXPECT_EQ(r2.cached, 0);
  const Out r3 = on.run(text("x"), 4);  // shorter than a block: nothing to look up
  EXPECT_EQ(r3.cached, 0);
}

TEST(EnginePrefixCache, TheCacheOutlivesTheRequestThatFilledItAndItsGeneratedTokensAreCachedToo) {
  PrefixEngine on(true, 64, 16);
  const auto p = text(prefix(40));
  const Out first = on.run(p, 40);  // prompt 40 + 40 generated: blocks of generated tokens are cached too
  ASSERT_EQ(first.error, "");
  for (int i = 0; i < 200 && on.engine().gauges().kv_usage > 0; ++i)  // gauges follow the step
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(on.engine().gauges().kv_usage, 0.0);  // nothing referenced once it is done: cached is free
  // The next turn of the conversation resends the whole history: prompt + the answer + a new message.
  std::vector<int32_t> turn2 = p;
  turn2.insert(turn2.end(), first.tokens.begin(), first.tokens.end());
  for (int32_t t : text("next?")) turn2.push_back(t);
  const Out second = on.run(turn2, 8);
  EXPECT_EQ(second.cached, 64);  // 79 tokens computed before: 4 full blocks
  PrefixEngine off(false, 64, 16);
  EXPECT_EQ(off.run(turn2, 8).tokens, second.tokens);
}

// Six prompts of 23 tokens (5 full blocks of 4) that share their first 4 blocks pairwise.
std::vector<std::vector<int32_t>> small_pool_prompts() {
  std::vector<std::vector<int32_t>> ps;
  for (int i = 0; i < 6; ++i)
    ps.push_back(text("shared" + std::to_string(i / 2) + "-prefix." + std::to_string(i) + "abcdef"));
  return ps;
}

TEST(EnginePrefixCache, EvictionUnderASmallPoolKeepsOutputsCorrect) {
  const auto ps = small_pool_prompts();
  PrefixEngine off(false, 12, 4), on(true, 12, 4);
  std::vector<std::vector<int32_t>> want;
  for (const auto& p : ps) want.push_back(off.run(p, 8).tokens);
  int hits = 0;
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < ps.size(); ++i) {
      const Out r = on.run(ps[i], 8);
      ASSERT_EQ(r.error, "") << i;
      EXPECT_EQ(r.tokens, want[i]) << "prompt " << i << " round " << round;
      EXPECT_EQ(r.cached % 4, 0);
      hits += r.cached > 0;
    }
  EXPECT_GT(hits, 0);
  // Six prompts through 12 blocks: prompt 0's blocks were evicted long ago.
  const Out again = on.run(ps[0], 8);
  EXPECT_LT(again.cached, (static_cast<int>(ps[0].size()) - 1) / 4 * 4);
  EXPECT_EQ(again.tokens, want[0]);
}

TEST(EnginePrefixCache, ConcurrentRequestsWithPreemptionEqualCachingOff) {
  const auto ps = small_pool_prompts();
  PrefixEngine off(false, 64, 4);
  std::vector<std::vector<int32_t>> want;
  for (int k = 0; k < 3; ++k)
    for (const auto& p : ps) want.push_back(off.run(p, 12).tokens);
  PrefixEngine on(true, 12, 4, 6, 16);  // 48 tokens of KV for 18 sequences of ~33: constant preemption
  std::vector<Submitted> subs;
  for (int k = 0; k < 3; ++k)
    for (const auto& p : ps) subs.push_back(on.submit(p, 12));
  int hits = 0;
  for (size_t i = 0; i < subs.size(); ++i) {
    const Out r = drain(*subs[i].channel);
    ASSERT_EQ(r.error, "") << i;
    EXPECT_EQ(r.tokens, want[i]) << "sequence " << i;
    hits += r.cached > 0;
  }
  EXPECT_GT(hits, 0);
  EXPECT_GT(on.engine().gauges().preemptions, 0u);
}

}  // namespace
}  // namespace spk::rt
