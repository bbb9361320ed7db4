// The step plan rank 0 broadcasts: encode/decode round trip, and malformed messages are errors.
#include "runtime/serve/tp_step.h"

#include <gtest/gtest.h>

namespace spk::rt {
namespace {

StepBatch sample() {
  StepBatch b;
  b.tokens = {5, 6, 7, 9};
  b.positions = {0, 1, 2, 7};
  b.seqs.push_back({0, 3, 3, {4}});
  b.seqs.push_back({3, 1, 8, {1, 2}});
  b.logit_rows = {2, 3};
  return b;
}

TEST(TpStep, RoundTrip) {
  const StepBatch b = sample();
  auto d = decode_step(encode_step(b));
  ASSERT_TRUE(d.ok()) << d.error().what();
  EXPECT_EQ(d->tokens, b.tokens);
  EXPECT_EQ(d->positions, b.positions);
  EXPECT_EQ(d->logit_rows, b.logit_rows);
  ASSERT_EQ(d->seqs.size(), 2u);
  EXPECT_EQ(d->seqs[1].q_start, 3);
  EXPECT_EQ(d->seqs[1].ctx_len, 8);
  EXPECT_EQ(d->seqs[1].block_table, (std::vector<int32_t>{1, 2}));
}

// Prefix caching: a sequence admitted with cached blocks starts at position ctx_len - q_len > 0 and may
// share leading block ids with another sequence. The workers follow the plan only, so those must travel:
// ctx_len, q_len, positions and the full block table (the KV of the shared blocks was written on every
// rank by the earlier steps that computed them).
TEST(TpStep, ReusedPrefixLengthAndSharedBlocksTravel) {
  StepBatch b;
  b.tokens = {11, 12, 13};
  b.positions = {32, 33, 48};  // seq 0: 32 cached tokens, 2 new; seq 1: 48 cached, 1 new
  b.seqs.push_back({0, 2, 34, {7, 3, 9}});
  b.seqs.push_back({2, 1, 49, {7, 3, 5, 6}});  // blocks 7 and 3 shared with seq 0
  b.logit_rows = {1, 2};
  auto d = decode_step(encode_step(b));
  ASSERT_TRUE(d.ok()) << d.error().what();
  EXPECT_EQ(d->positions, b.positions);
  ASSERT_EQ(d->seqs.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(d->seqs[i].ctx_len - d->seqs[i].q_len, b.seqs[i].ctx_len - b.seqs[i].q_len);
    EXPECT_EQ(d->seqs[i].block_table, b.seqs[i].block_table);
  }
}

TEST(TpStep, MalformedMessagesAreErrors) {
  const std::string m = encode_step(sample());
  for (size_t cut = 0; cut < m.size(); ++cut) {
    auto d = decode_step(m.substr(0, cut));
    EXPECT_FALSE(d.ok()) << "prefix of " << cut << " bytes decoded";
  }
  auto trailing = decode_step(m + "x");
  ASSERT_FALSE(trailing.ok());
  EXPECT_NE(trailing.error().what().find("malformed step plan from rank 0"), std::string::npos);
  std::string huge = m;
  huge[1] = '\xff';  // token count far beyond the message
  huge[4] = '\x7f';
  EXPECT_FALSE(decode_step(huge).ok());
}

}  // namespace
}  // namespace spk::rt
