// Warmup: the engine decodes twice at every batch size max_num_seqs..1 before warm_decode_buckets returns (so
// readiness, printed after it, never comes before every decode shape ran), and a dead engine is an error.
#include "runtime/serve/warmup.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/serve/fakes.h"

namespace spk::rt {
namespace {

TEST(Warmup, DecodesAtEveryBatchSizeBeforeReturning) {
  for (int n : {1, 5, 19}) {
    testing::HashModel m;
    ASSERT_TRUE(m.allocate_kv(256, 16).ok());
    EngineConfig c;
    c.sched = {n, 256};
    c.max_model_len = 256;
    c.eos_ids = {testing::ByteTokenizer::kEos};
    Engine e(m, c, nullptr);
    e.start();
    auto r = warm_decode_buckets(e, n, 'a');
    e.stop();
    ASSERT_TRUE(r.ok()) << r.error().what();
    EXPECT_EQ(r->sequences, n);
    std::multiset<int> seen(m.batch_sizes.begin() + 1, m.batch_sizes.end());  // after the prefill step
    for (int b = 1; b <= n; ++b) EXPECT_GE(seen.count(b), 2u) << "n " << n << ": batch " << b;
    EXPECT_LE(m.steps.load(), 2 * n + 3) << "n " << n;
  }
}

TEST(Warmup, AStoppedEngineIsAnError) {
  testing::HashModel m;
  ASSERT_TRUE(m.allocate_kv(64, 16).ok());
  EngineConfig c;
  c.sched = {4, 256};
  c.max_model_len = 256;
  Engine e(m, c, nullptr);
  auto r = warm_decode_buckets(e, 4, 'a', std::chrono::seconds(1));  // never started: nothing runs
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("warmup sequence 0"), std::string::npos) << r.error().what();
}

}  // namespace
}  // namespace spk::rt
