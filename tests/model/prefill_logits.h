// One sequence's prefill of tokens [from, to) on blocks 0..7 (the logits of every position, or of the last),
// and the max error relative to max |want| that the model tests compare those logits by.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "runtime/model/model.h"

namespace spk::test {

inline std::vector<float> prefill_logits(rt::Model& m, const std::vector<int32_t>& tokens, int from, int to,
                                         bool all) {
  rt::StepBatch b;
  rt::SeqSlice s;
  s.q_start = 0, s.q_len = to - from, s.ctx_len = to;
  for (int i = 0; i < 8; ++i) s.block_table.push_back(i);
  for (int p = from; p < to; ++p) {
    if (all || p == to - 1) b.logit_rows.push_back(static_cast<int32_t>(b.tokens.size()));
    b.tokens.push_back(tokens[p]);
    b.positions.push_back(p);
  }
  b.seqs = {s};
  std::vector<float> logits;
  auto st = m.forward(b, logits);
  EXPECT_TRUE(st.ok()) << st.error().what();
  return logits;
}

inline double max_rel_err(const float* got, const std::vector<double>& want) {
  double mx = 0, err = 0;
  for (double w : want) mx = std::max(mx, std::fabs(w));
  for (size_t i = 0; i < want.size(); ++i) err = std::max(err, std::fabs(got[i] - want[i]));
  return err / std::max(mx, 1e-30);
}

}  // namespace spk::test
