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
