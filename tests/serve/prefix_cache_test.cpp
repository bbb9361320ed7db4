// Automatic prefix caching in the block manager and the scheduler: hash-chain keys, sharing by reference,
// LRU eviction of unreferenced cached blocks (a table's tail first), collisions never reuse other tokens'
// KV, and a long random run of admit / compute / free / preempt through the real Scheduler over a
// simulated KV pool: after every step no block is both free and referenced, every ref count equals the
// table entries naming it, every KV slot a step reads holds the token of that position, and no step ever
// writes into a shared or cached block.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "runtime/serve/block_manager.h"
#include "runtime/serve/scheduler.h"

namespace spk::rt {
namespace {

std::vector<int32_t> iota_tokens(int n, int32_t first) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = first + i;
  return t;
}

// Registers the full blocks of tokens[0, computed) held by `table` (what Scheduler::commit does).
void cache_full(BlockManager& bm, const std::vector<int32_t>& table, const std::vector<int32_t>& tokens,
                int computed) {
  std::vector<BlockHash> keys;
  extend_block_hashes(keys, tokens, computed, bm.block_size());
  for (size_t i = 0; i < keys.size(); ++i)
    bm.cache_block(table[i], keys[i], tokens.data() + i * static_cast<size_t>(bm.block_size()));
}

std::vector<int32_t> lookup(const BlockManager& bm, const std::vector<int32_t>& tokens) {
  std::vector<BlockHash> keys;
  extend_block_hashes(keys, tokens, static_cast<int>(tokens.size()), bm.block_size());
  return bm.find_cached(keys, tokens, static_cast<int>(keys.size()));
}

TEST(PrefixHash, ChainKeysDependOnTheWholePrefix) {
  const auto a = iota_tokens(12, 0);
  auto b = a;
  b[1] = 99;  // differs in block 0 only
  std::vector<BlockHash> ka, kb;
  extend_block_hashes(ka, a, 12, 4);
  extend_block_hashes(kb, b, 11, 4);  // a partial last block gets no key
  ASSERT_EQ(ka.size(), 3u);
  ASSERT_EQ(kb.size(), 2u);
  EXPECT_FALSE(ka[0] == kb[0]);
  EXPECT_FALSE(ka[1] == kb[1]);  // same tokens in block 1, different prefix: different key
  extend_block_hashes(kb, b, 12, 4);
  EXPECT_EQ(kb.size(), 3u);
  std::vector<BlockHash> again;
  extend_block_hashes(again, a, 12, 4);
  EXPECT_TRUE(again[2] == ka[2]);
}

TEST(PrefixCache, FullBlocksAreSharedByReferenceAndOutliveTheirSequence) {
  BlockManager bm(8, 4, true);
  const auto prompt = iota_tokens(10, 1);  // blocks: [1..4] [5..8] + 2 tokens
  std::vector<int32_t> a;
  ASSERT_TRUE(bm.allocate(a, {}, 10));
  cache_full(bm, a, prompt, 10);
  EXPECT_EQ(bm.num_cached(), 2);
  std::vector<int32_t> hits = lookup(bm, prompt);
  ASSERT_EQ(hits, (std::vector<int32_t>{a[0], a[1]}));
  EXPECT_EQ(bm.admission_cost(hits, 10), 1);  // the shared blocks are referenced: only the tail is new
  std::vector<int32_t> b;
  ASSERT_TRUE(bm.allocate(b, hits, 10));
  EXPECT_EQ(bm.ref_count(a[0]), 2);
  EXPECT_EQ(bm.ref_count(a[1]), 2);
  EXPECT_NE(b[2], a[2]);  // the partial block being written is never shared
  EXPECT_EQ(bm.num_free(), 8 - 4);
  const std::vector<const std::vector<int32_t>*> both = {&a, &b};
  EXPECT_EQ(bm.check(&both), "");
  const int32_t shared0 = a[0];
  bm.release(a);
  bm.release(b);
  EXPECT_EQ(bm.num_free(), 8);  // cached blocks are free for allocation
  EXPECT_EQ(bm.ref_count(shared0), 0);
  EXPECT_TRUE(bm.is_cached(shared0));
  EXPECT_DOUBLE_EQ(bm.usage(), 0.0);
  hits = lookup(bm, prompt);
  EXPECT_EQ(hits.size(), 2u);                 // still cached after both sequences are gone
  EXPECT_EQ(bm.admission_cost(hits, 10), 3);  // revived hits leave the free pool too
  EXPECT_EQ(bm.check(), "");
}

TEST(PrefixCache, EvictionTakesEmptyBlocksFirstThenTheLeastRecentlyReleasedTailFirst) {
  BlockManager bm(4, 2, true);
  const auto p = iota_tokens(6, 10);  // 3 full blocks
  std::vector<int32_t> a;
  ASSERT_TRUE(bm.allocate(a, {}, 6));
  cache_full(bm, a, p, 6);
  bm.release(a);  // 3 cached + 1 empty
  std::vector<int32_t> x;
  ASSERT_TRUE(bm.grow(x, 2));  // the empty block: nothing evicted
  EXPECT_EQ(bm.num_evictions(), 0u);
  EXPECT_EQ(lookup(bm, p).size(), 3u);
  ASSERT_TRUE(bm.grow(x, 4));  // evicts the prefix's LAST block (released first in LRU order)
  EXPECT_EQ(bm.num_evictions(), 1u);
  EXPECT_EQ(lookup(bm, p).size(), 2u);
  ASSERT_TRUE(bm.grow(x, 6));
  EXPECT_EQ(lookup(bm, p).size(), 1u);
  EXPECT_FALSE(bm.grow(x, 10));  // 1 free, 2 needed: all or nothing
  EXPECT_EQ(lookup(bm, p).size(), 1u);
  const std::vector<const std::vector<int32_t>*> t = {&x};
  EXPECT_EQ(bm.check(&t), "");
}

TEST(PrefixCache, ARevivedBlockIsNeverEvictedByItsOwnAdmission) {
  BlockManager bm(3, 2, true);
  const auto p = iota_tokens(4, 0);
  std::vector<int32_t> a;
  ASSERT_TRUE(bm.allocate(a, {}, 4));
  cache_full(bm, a, p, 4);
  bm.release(a);
  std::vector<int32_t> filler;
  ASSERT_TRUE(bm.grow(filler, 2));  // the one empty block
  auto hits = lookup(bm, p);
  ASSERT_EQ(hits.size(), 2u);
  std::vector<int32_t> b;
  EXPECT_FALSE(bm.allocate(b, hits, 6));  // 2 revived + 1 new > 2 free
  EXPECT_TRUE(b.empty());
  ASSERT_TRUE(bm.allocate(b, hits, 4));
  EXPECT_EQ(b, hits);
  const std::vector<const std::vector<int32_t>*> t = {&filler, &b};
  EXPECT_EQ(bm.check(&t), "");
}

TEST(PrefixCache, AKeyCollisionNeverReusesOtherTokens) {
  BlockManager bm(4, 2, true);
  std::vector<int32_t> a;
  ASSERT_TRUE(bm.allocate(a, {}, 2));
  const std::vector<int32_t> x = {5, 6}, y = {7, 8};
  const BlockHash k{42, 43};
  bm.cache_block(a[0], k, x.data());
  EXPECT_EQ(bm.find_cached({k}, x, 1).size(), 1u);
  EXPECT_TRUE(bm.find_cached({k}, y, 1).empty());  // same key, other tokens: a miss
  // A second block with an equal key stays private; the first keeps the key.
  std::vector<int32_t> b;
  ASSERT_TRUE(bm.allocate(b, {}, 2));
  bm.cache_block(b[0], k, x.data());
  EXPECT_FALSE(bm.is_cached(b[0]));
  EXPECT_EQ(bm.find_cached({k}, x, 1), a);
  EXPECT_EQ(bm.check(), "");
}

TEST(PrefixCache, OffMeansNoKeysAndNoHits) {
  BlockManager bm(4, 2, false);
  const auto p = iota_tokens(4, 0);
  std::vector<int32_t> a;
  ASSERT_TRUE(bm.allocate(a, {}, 4));
  cache_full(bm, a, p, 4);
  EXPECT_EQ(bm.num_cached(), 0);
  EXPECT_TRUE(lookup(bm, p).empty());
}

// The scheduler over a simulated pool: a KV slot holds the token id written at its position.
struct SimPool {
  BlockManager& bm;
  std::vector<int32_t> kv;
  explicit SimPool(BlockManager& b)
      : bm(b), kv(static_cast<size_t>(b.num_blocks()) * static_cast<size_t>(b.block_size()), -1) {}
  // Checks and performs one step as the model would; "" when everything holds.
  std::string run(const StepBatch& batch) {
    const int bs = bm.block_size();
    for (const auto& s : batch.seqs)
      for (int i = 0; i < s.q_len; ++i) {
        const int pos = batch.positions[static_cast<size_t>(s.q_start + i)];
        const int32_t blk = s.block_table.at(static_cast<size_t>(pos / bs));
        if (bm.ref_count(blk) != 1 || bm.is_cached(blk))
          return "a step writes into block " + std::to_string(blk) + " (refs " +
                 std::to_string(bm.ref_count(blk)) + (bm.is_cached(blk) ? ", cached)" : ")");
        kv[static_cast<size_t>(blk) * bs + pos % bs] = batch.tokens[static_cast<size_t>(s.q_start + i)];
      }
    return {};
  }
  std::string verify(const Sequence& s, int ctx_len) const {
    const int bs = bm.block_size();
    for (int p = 0; p < ctx_len; ++p) {
      const int32_t blk = s.block_table.at(static_cast<size_t>(p / bs));
      if (kv[static_cast<size_t>(blk) * bs + p % bs] != s.tokens[static_cast<size_t>(p)])
        return "sequence " + std::to_string(s.id) + " reads a wrong token at position " + std::to_string(p);
    }
    return {};
  }
};

TEST(PrefixCache, RandomAdmitComputeFreePreemptKeepsEveryInvariant) {
  const uint32_t seed = std::random_device{}();
  std::mt19937 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  BlockManager bm(24, 4, true);  // 96 tokens: constant eviction and preemption
  Scheduler sch({6, 24}, bm);
  SimPool pool(bm);
  std::vector<std::vector<int32_t>> prefixes;
  for (int i = 0; i < 4; ++i) prefixes.push_back(iota_tokens(4 + 9 * i, 1000 * (i + 1)));
  std::map<uint64_t, std::shared_ptr<Sequence>> live;
  uint64_t next = 1, hits = 0, preempted = 0;
  for (int step = 0; step < 3000; ++step) {
    if (rng() % 3 == 0 && live.size() < 12) {  // a new request: a shared prefix + a private tail
      auto s = std::make_shared<Sequence>();
      s->id = next++;
      s->tokens = prefixes[rng() % prefixes.size()];
      for (int n = static_cast<int>(rng() % 10); n > 0; --n)
        s->tokens.push_back(static_cast<int32_t>(rng() % 7));
      s->prompt_len = s->num_tokens();
      live[s->id] = s;
      sch.add(s);
    }
    if (rng() % 11 == 0 && !live.empty()) {  // a client goes away (running or waiting)
      auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      sch.remove(it->first);
      live.erase(it);
    }
    SchedulerOutput out = sch.schedule();
    preempted += out.preempted.size();
    hits += static_cast<uint64_t>(out.prefix_hits);
    ASSERT_LE(out.prefix_hits, out.prefix_queries);
    for (const auto& sc : out.scheduled) ASSERT_GE(sc.num_tokens, 1);
    const StepBatch batch = sch.build_batch(out);
    ASSERT_EQ(pool.run(batch), "") << "step " << step;
    for (const auto& sc : out.scheduled)
      ASSERT_EQ(pool.verify(*sc.seq, sc.seq->num_computed + sc.num_tokens), "") << "step " << step;
    sch.commit(out);
    for (const auto& sc : out.scheduled) {
      if (!sc.sample) continue;
      sc.seq->tokens.push_back(static_cast<int32_t>(rng() % 5));
      if (sc.seq->num_generated() >= 6 + static_cast<int>(sc.seq->id % 13)) {  // finished
        sch.remove(sc.seq->id);
        live.erase(sc.seq->id);
      }
    }
    std::vector<const std::vector<int32_t>*> tables;
    for (const auto& s : sch.running()) tables.push_back(&s->block_table);
    for (const auto& s : sch.waiting()) {
      ASSERT_TRUE(s->block_table.empty()) << "waiting sequence " << s->id << " holds blocks";
      tables.push_back(&s->block_table);
    }
    ASSERT_EQ(bm.check(&tables), "") << "step " << step;
  }
  EXPECT_GT(hits, 0u);
  EXPECT_GT(preempted, 0u);
  EXPECT_GT(bm.num_evictions(), 0u);
}

TEST(PrefixCache, AdmissionSkipsCachedBlocksButAlwaysComputesTheLastToken) {
  BlockManager bm(16, 4, true);
  Scheduler sch({4, 64}, bm);
  auto mk = [](uint64_t id, int n) {
    auto s = std::make_shared<Sequence>();
    s->id = id;
    s->tokens = iota_tokens(n, 0);
    s->prompt_len = n;
    return s;
  };
  auto a = mk(1, 8);  // exactly two blocks
  sch.add(a);
  auto o = sch.schedule();
  EXPECT_EQ(o.prefix_queries, 8);
  EXPECT_EQ(o.prefix_hits, 0);
  sch.commit(o);
  sch.remove(1);
  auto b = mk(2, 8);  // same prompt: block 0 is reused, block 1 recomputed (its last token needs logits)
  sch.add(b);
  o = sch.schedule();
  ASSERT_EQ(o.scheduled.size(), 1u);
  EXPECT_EQ(o.scheduled[0].num_tokens, 4);
  EXPECT_EQ(b->num_computed, 4);
  EXPECT_EQ(b->num_cached_tokens, 4);
  EXPECT_EQ(o.prefix_hits, 4);
  const StepBatch batch = sch.build_batch(o);
  EXPECT_EQ(batch.positions.front(), 4);
  EXPECT_EQ(batch.seqs[0].ctx_len, 8);
  EXPECT_EQ(batch.seqs[0].q_len, 4);
  EXPECT_EQ(o.num_batched_tokens, 4);  // the budget pays only for what is computed
  sch.commit(o);
  auto c = mk(3, 11);  // two cached blocks + 3 new tokens
  sch.add(c);
  o = sch.schedule();
  ASSERT_EQ(o.scheduled.size(), 1u);  // b has nothing to compute (no token was appended): only c
  EXPECT_EQ(o.scheduled[0].seq, c);
  EXPECT_EQ(o.scheduled[0].num_tokens, 3);
  EXPECT_EQ(c->num_cached_tokens, 8);
  EXPECT_EQ(bm.ref_count(c->block_table[0]), 2);  // shared with b
}

}  // namespace
}  // namespace spk::rt
