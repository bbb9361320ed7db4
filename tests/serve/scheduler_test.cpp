// Scheduler policy: decode first, chunked prefill within max_num_batched_tokens, max_num_seqs, strict
// FIFO admission, preemption of the newest running sequence (recompute) when the pool runs out.
#include "runtime/serve/scheduler.h"

#include <gtest/gtest.h>

#include <map>

namespace spk::rt {
namespace {

std::shared_ptr<Sequence> seq(uint64_t id, int prompt_len) {
  auto s = std::make_shared<Sequence>();
  s->id = id;
  for (int i = 0; i < prompt_len; ++i) s->tokens.push_back(static_cast<int32_t>(100 + i));
  s->prompt_len = prompt_len;
  return s;
}

// Plays the engine: commit, then append one token to each sampled sequence.
void finish_step(Scheduler& sch, const SchedulerOutput& out) {
  sch.commit(out);
  for (const auto& sc : out.scheduled)
    if (sc.sample) sc.seq->tokens.push_back(7);
}

std::map<uint64_t, int> tokens_by_id(const SchedulerOutput& out) {
  std::map<uint64_t, int> m;
  for (const auto& sc : out.scheduled) m[sc.seq->id] = sc.num_tokens;
  return m;
}

TEST(Scheduler, ChunkedPrefillSplitsALongPromptAcrossSteps) {
  BlockManager bm(100, 16);
  Scheduler sch({8, 64}, bm);
  auto a = seq(1, 150);
  sch.add(a);
  auto o1 = sch.schedule();
  ASSERT_EQ(o1.scheduled.size(), 1u);
  EXPECT_EQ(o1.scheduled[0].num_tokens, 64);
  EXPECT_FALSE(o1.scheduled[0].sample);
  auto b1 = sch.build_batch(o1);
  EXPECT_EQ(b1.tokens.size(), 64u);
  EXPECT_EQ(b1.positions.front(), 0);
  EXPECT_EQ(b1.seqs[0].ctx_len, 64);
  EXPECT_EQ(b1.seqs[0].block_table.size(), 4u);
  EXPECT_TRUE(b1.logit_rows.empty());
  finish_step(sch, o1);
  auto o2 = sch.schedule();
  EXPECT_EQ(o2.scheduled[0].num_tokens, 64);
  finish_step(sch, o2);
  auto o3 = sch.schedule();
  ASSERT_EQ(o3.scheduled[0].num_tokens, 22);
  EXPECT_TRUE(o3.scheduled[0].sample);
  auto b3 = sch.build_batch(o3);
  EXPECT_EQ(b3.positions.front(), 128);
  EXPECT_EQ(b3.seqs[0].ctx_len, 150);
  EXPECT_EQ(b3.logit_rows, (std::vector<int32_t>{21}));
  finish_step(sch, o3);
  auto o4 = sch.schedule();  // decode: one token at position 150
  ASSERT_EQ(o4.scheduled[0].num_tokens, 1);
  EXPECT_TRUE(o4.scheduled[0].sample);
  EXPECT_EQ(sch.build_batch(o4).positions, (std::vector<int32_t>{150}));
}

TEST(Scheduler, DecodesGoFirstThenPrefillFillsTheBudget) {
  BlockManager bm(100, 16);
  Scheduler sch({8, 32}, bm);
  auto a = seq(1, 10), b = seq(2, 10);
  sch.add(a);
  sch.add(b);
  auto o1 = sch.schedule();  // both prefills fit: 20 tokens
  EXPECT_EQ(tokens_by_id(o1), (std::map<uint64_t, int>{{1, 10}, {2, 10}}));
  finish_step(sch, o1);
  auto c = seq(3, 100);
  sch.add(c);
  auto o2 = sch.schedule();  // 2 decodes, then 30 tokens of c's prefill
  EXPECT_EQ(tokens_by_id(o2), (std::map<uint64_t, int>{{1, 1}, {2, 1}, {3, 30}}));
  EXPECT_EQ(o2.num_batched_tokens, 32);
  auto batch = sch.build_batch(o2);
  EXPECT_EQ(batch.seqs.size(), 3u);
  EXPECT_EQ(batch.logit_rows, (std::vector<int32_t>{0, 1}));  // c is mid-prefill: no logits
}

TEST(Scheduler, MaxNumSeqsCapsRunningAndAdmissionIsFifo) {
  BlockManager bm(100, 16);
  Scheduler sch({2, 1000}, bm);
  for (uint64_t i = 1; i <= 4; ++i) sch.add(seq(i, 5));
  auto o1 = sch.schedule();
  EXPECT_EQ(tokens_by_id(o1), (std::map<uint64_t, int>{{1, 5}, {2, 5}}));
  EXPECT_EQ(sch.num_running(), 2u);
  EXPECT_EQ(sch.num_waiting(), 2u);
  finish_step(sch, o1);
  sch.remove(1);  // finished
  auto o2 = sch.schedule();
  EXPECT_EQ(tokens_by_id(o2), (std::map<uint64_t, int>{{2, 1}, {3, 5}}));  // 3 before 4
}

TEST(Scheduler, HeadOfQueueThatDoesNotFitBlocksLaterOnes) {
  BlockManager bm(4, 4);  // 16 tokens
  Scheduler sch({8, 1000}, bm);
  sch.add(seq(1, 10));  // 3 blocks
  auto o1 = sch.schedule();
  finish_step(sch, o1);
  sch.add(seq(2, 8));  // 2 blocks: does not fit (1 free)
  sch.add(seq(3, 2));  // 1 block: would fit, but FIFO says wait
  auto o2 = sch.schedule();
  EXPECT_EQ(tokens_by_id(o2), (std::map<uint64_t, int>{{1, 1}}));
  EXPECT_EQ(sch.num_waiting(), 2u);
  EXPECT_EQ(sch.waiting().front()->id, 2u);
}

TEST(Scheduler, PreemptsTheNewestAndRequeuesItAtTheFront) {
  BlockManager bm(4, 4);  // 16 tokens
  Scheduler sch({8, 1000}, bm);
  auto a = seq(1, 8), b = seq(2, 8);  // 2 blocks each: the pool is full after prefill
  sch.add(a);
  sch.add(b);
  auto o1 = sch.schedule();
  ASSERT_EQ(o1.scheduled.size(), 2u);
  finish_step(sch, o1);  // both now hold 9 tokens, 8 computed
  auto late = seq(3, 1);
  sch.add(late);
  auto o2 = sch.schedule();  // a needs a 3rd block: b (newest) is preempted
  EXPECT_EQ(o2.preempted, (std::vector<uint64_t>{2}));
  EXPECT_EQ(tokens_by_id(o2), (std::map<uint64_t, int>{{1, 1}}));  // no admission in a preempting step
  EXPECT_EQ(b->num_computed, 0);
  EXPECT_TRUE(b->block_table.empty());
  EXPECT_EQ(b->num_preemptions, 1);
  ASSERT_EQ(sch.num_waiting(), 2u);
  EXPECT_EQ(sch.waiting().front()->id, 2u);  // ahead of the later arrival
  finish_step(sch, o2);
  sch.remove(1);  // a finishes: its 3 blocks come back
  auto o3 = sch.schedule();
  // b recomputes prompt + its generated token (9 tokens) and samples; then 3 is admitted.
  EXPECT_EQ(tokens_by_id(o3), (std::map<uint64_t, int>{{2, 9}, {3, 1}}));
  for (const auto& sc : o3.scheduled) EXPECT_TRUE(sc.sample);
}

TEST(Scheduler, ALoneSequenceThatOutgrowsThePoolPreemptsItself) {
  BlockManager bm(2, 4);
  Scheduler sch({8, 1000}, bm);
  auto a = seq(1, 8);
  sch.add(a);
  auto o1 = sch.schedule();
  finish_step(sch, o1);
  auto o2 = sch.schedule();  // needs a 3rd block, nobody else to evict
  EXPECT_EQ(o2.preempted, (std::vector<uint64_t>{1}));
  EXPECT_TRUE(o2.empty());
  EXPECT_EQ(bm.num_free(), 2);
}

TEST(Scheduler, RemoveFreesBlocksOfWaitingAndRunning) {
  BlockManager bm(10, 4);
  Scheduler sch({8, 1000}, bm);
  sch.add(seq(1, 8));
  sch.add(seq(2, 8));
  auto o = sch.schedule();
  finish_step(sch, o);
  EXPECT_EQ(bm.num_free(), 6);
  sch.remove(2);
  EXPECT_EQ(bm.num_free(), 8);
  sch.remove(99);  // unknown: no-op
  sch.remove(1);
  EXPECT_TRUE(sch.idle());
  EXPECT_EQ(bm.num_free(), 10);
}

// Many sequences, a tight pool: every sequence finishes with exactly its tokens and no block leaks.
TEST(Scheduler, StressEverySequenceCompletesUnderPreemption) {
  BlockManager bm(12, 4);  // 48 tokens
  Scheduler sch({6, 20}, bm);
  std::vector<std::shared_ptr<Sequence>> all;
  for (uint64_t i = 0; i < 20; ++i) {
    all.push_back(seq(i, 3 + static_cast<int>(i % 7) * 3));
    sch.add(all.back());
  }
  const int gen = 12;
  int steps = 0;
  while (!sch.idle() && steps < 10000) {
    auto o = sch.schedule();
    ASSERT_LE(o.num_batched_tokens, 20);
    ASSERT_LE(sch.num_running(), 6u);
    auto batch = sch.build_batch(o);
    for (const auto& sl : batch.seqs) ASSERT_GE(static_cast<int>(sl.block_table.size()) * 4, sl.ctx_len);
    finish_step(sch, o);
    for (const auto& sc : o.scheduled)
      if (sc.sample && sc.seq->num_generated() >= gen) sch.remove(sc.seq->id);
    ++steps;
  }
  EXPECT_TRUE(sch.idle()) << "livelock after " << steps << " steps";
  EXPECT_EQ(bm.num_free(), 12);
  for (const auto& s : all) EXPECT_EQ(s->num_generated(), gen) << "seq " << s->id;
  EXPECT_GT(sch.total_preemptions(), 0u);
}

}  // namespace
}  // namespace spk::rt
