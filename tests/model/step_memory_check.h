// The memory plan's contract, checked on any backend (issues 42 and 44): reserve_steps(limits) allocates
// what activation_bytes(limits) plans (planned covers it, within 1.25x plus allocator rounding); after the
// KV pool and seal_memory(), the largest prefill, the largest decode and a step of max_seqs prefills allocate
// nothing; one token past the limit is refused naming the knob. `device_free` (may be null) reports the
// device's free bytes, so a backend allocating behind its own counters is caught too.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/model/model.h"

namespace spk::test {

struct StepMemoryFigures {
  uint64_t planned = 0, reserved = 0;
};

inline rt::StepBatch prefill_batch(const std::vector<int>& q_lens, int vocab, int block_size,
                                   int blocks_per_seq) {
  rt::StepBatch b;
  for (size_t s = 0; s < q_lens.size(); ++s) {
    const int q0 = static_cast<int>(b.tokens.size());
    for (int i = 0; i < q_lens[s]; ++i) {
      b.tokens.push_back(static_cast<int32_t>((7919ll * (q0 + i) + 13 * s) % vocab));
      b.positions.push_back(i);
    }
    std::vector<int32_t> table(blocks_per_seq);
    for (int i = 0; i < blocks_per_seq; ++i) table[i] = static_cast<int32_t>(s) * blocks_per_seq + i;
    b.seqs.push_back({q0, q_lens[s], q_lens[s], table});
    b.logit_rows.push_back(q0 + q_lens[s] - 1);
  }
  (void)block_size;
  return b;
}

inline StepMemoryFigures check_step_memory(rt::Model& m, const rt::StepLimits& lim,
                                           const std::function<uint64_t()>& device_free = nullptr) {
  StepMemoryFigures f;
  f.planned = m.activation_bytes(lim);
  const uint64_t before = m.memory_counters().live_bytes;
  const Status st = m.reserve_steps(lim);
  EXPECT_TRUE(st.ok()) << st.error().what();
  f.reserved = m.memory_counters().live_bytes - before;
  EXPECT_LE(f.reserved, f.planned) << "reserve_steps allocated more than activation_bytes plans";
  EXPECT_LE(static_cast<double>(f.planned), 1.25 * static_cast<double>(f.reserved) + (64 << 10))
      << "activation_bytes plans more than 1.25x what a step reserves";

  const int bs = lim.block_size, per_seq = (lim.max_model_len + bs - 1) / bs;
  const Status kv = m.allocate_kv(per_seq * lim.max_seqs, bs);
  EXPECT_TRUE(kv.ok()) << kv.error().what();
  m.seal_memory();
  const uint64_t free_before = device_free ? device_free() : 0;
  const int vocab = m.config().vocab_size;
  std::vector<float> logits;
  std::vector<SampledToken> toks;

  // The largest prefill: one sequence of max_tokens (capped by the context) tokens.
  const int one = std::min(lim.max_tokens, lim.max_model_len);
  Status s1 = m.forward(prefill_batch({one}, vocab, bs, per_seq), logits);
  EXPECT_TRUE(s1.ok()) << "largest prefill: " << s1.error().what();
  // max_seqs prefills sharing max_tokens tokens, every one sampled.
  std::vector<int> lens(lim.max_seqs, std::max(1, lim.max_tokens / lim.max_seqs));
  for (int i = 0, left = lim.max_tokens - lens[0] * lim.max_seqs; left > 0; ++i, --left)
    ++lens[i % lim.max_seqs];
  for (int& l : lens) l = std::min(l, lim.max_model_len - 1);
  const rt::StepBatch mixed = prefill_batch(lens, vocab, bs, per_seq);
  Status s2 = m.forward_sample(mixed, std::vector<SampleRow>(mixed.logit_rows.size()), toks, logits);
  EXPECT_TRUE(s2.ok()) << "max_seqs prefills: " << s2.error().what();
  // The largest decode: max_seqs sequences, one new token each after their prompt.
  rt::StepBatch dec;
  for (int s = 0; s < lim.max_seqs; ++s) {
    dec.tokens.push_back(s % vocab);
    dec.positions.push_back(lens[s]);
    std::vector<int32_t> table(per_seq);
    for (int i = 0; i < per_seq; ++i) table[i] = s * per_seq + i;
    dec.seqs.push_back({s, 1, lens[s] + 1, table});
    dec.logit_rows.push_back(s);
  }
  for (int rep = 0; rep < 3; ++rep) {  // repeated: graph capture and replay on CUDA
    Status s3 = m.forward_sample(dec, std::vector<SampleRow>(lim.max_seqs), toks, logits);
    EXPECT_TRUE(s3.ok()) << "largest decode: " << s3.error().what();
  }
  EXPECT_EQ(m.memory_counters().sealed_allocations, 0u);
  if (device_free) {
    // Our allocations are counted above; this catches the rest (a library allocating behind us). CUDA graph
    // instantiation takes a little device memory of its own (the graph's kernel parameters): allow 64 MiB.
    const int64_t taken = static_cast<int64_t>(free_before) - static_cast<int64_t>(device_free());
    std::printf("device memory taken by the steps outside the backend's allocator: %lld bytes\n",
                static_cast<long long>(taken));
    EXPECT_LE(taken, int64_t{64} << 20) << "device memory taken during the steps";
  }

  // One token more than the plan: refused, naming the knob.
  if (lim.max_tokens < lim.max_model_len) {
    Status over = m.forward(prefill_batch({lim.max_tokens + 1}, vocab, bs, per_seq), logits);
    EXPECT_FALSE(over.ok());
    if (!over.ok())
      EXPECT_NE(over.error().what().find("--max-num-batched-tokens"), std::string::npos)
          << over.error().what();
  }
  return f;
}

}  // namespace spk::test
