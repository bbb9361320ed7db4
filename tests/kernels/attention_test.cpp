// kv_write + paged attention against a naive double attention over contiguous per-sequence K/V.
// The batch mixes a 1-token sequence, a full prefill, a chunked prefill over cached context and a
// decode over 989 cached tokens; blocks are handed out shuffled (non-contiguous tables).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernel_test_util.h"

namespace spk::test {
namespace {

struct SeqCase {
  int32_t ctx, q;
};

class AttentionTest : public KernelTest {
 protected:
  void run(const std::vector<SeqCase>& cases, int64_t hq, int64_t hk, int64_t hd, int window) {
    SCOPED_TRACE(seed_note() + " hq=" + std::to_string(hq) + " hk=" + std::to_string(hk) +
                 " hd=" + std::to_string(hd) + " window=" + std::to_string(window));
    const int32_t bs = 16;
    int32_t total_blocks = 0;
    for (auto c : cases) total_blocks += (c.ctx + bs - 1) / bs;
    total_blocks += 3;  // spare blocks nobody uses
    std::vector<int32_t> perm(total_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng_);
    KvCache cache{zeros({total_blocks, bs, hk, hd}), zeros({total_blocks, bs, hk, hd}), {}, {}};

    std::vector<std::vector<float>> K, V;  // per sequence [ctx, hk, hd]
    StepMeta prev, cur;
    prev.block_size = cur.block_size = bs;
    int32_t next_block = 0;
    for (auto c : cases) {
      K.push_back(randn(int64_t{c.ctx} * hk * hd));
      V.push_back(randn(int64_t{c.ctx} * hk * hd));
      std::vector<int32_t> table;
      for (int32_t b = 0; b < (c.ctx + bs - 1) / bs; ++b) table.push_back(perm[next_block++]);
      auto add = [&](StepMeta& m, int32_t from, int32_t to) {
        SeqMeta s{static_cast<int32_t>(m.positions.size()), to - from, to,
                  static_cast<int32_t>(m.block_tables.size())};
        for (int32_t p = from; p < to; ++p) {
          m.positions.push_back(p);
          m.slots.push_back(table[p / bs] * bs + p % bs);
        }
        m.block_tables.insert(m.block_tables.end(), table.begin(), table.end());
        m.seqs.push_back(s);
      };
      add(prev, 0, c.ctx - c.q);
      add(cur, c.ctx - c.q, c.ctx);
    }
    // Step 1 caches the context; step 2 writes the new tokens and attends.
    auto write = [&](const StepMeta& m, bool new_part) {
      const int64_t n = static_cast<int64_t>(m.positions.size());
      std::vector<float> k(n * hk * hd), v(n * hk * hd);
      int64_t row = 0;
      for (size_t s = 0; s < cases.size(); ++s)
        for (int32_t p = new_part ? cases[s].ctx - cases[s].q : 0;
             p < (new_part ? cases[s].ctx : cases[s].ctx - cases[s].q); ++p, ++row) {
          std::copy_n(K[s].begin() + p * hk * hd, hk * hd, k.begin() + row * hk * hd);
          std::copy_n(V[s].begin() + p * hk * hd, hk * hd, v.begin() + row * hk * hd);
        }
      ASSERT_TRUE(be_->begin_step(m).ok());
      auto st = be_->kv_write(f32(k, {n, hk, hd}), f32(v, {n, hk, hd}), cache);
      ASSERT_TRUE(st.ok()) << st.error().what();
    };
    write(prev, false);
    write(cur, true);
    const int64_t n = static_cast<int64_t>(cur.positions.size());
    auto q = randn(n * hq * hd);
    Tensor qt = f32(q, {n, hq, hd}), out = zeros({n, hq, hd});
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    auto st = be_->attention(qt, cache, AttnSpec::windowed(scale, window), out);
    ASSERT_TRUE(st.ok()) << st.error().what();
    auto got = host(out);

    int64_t row = 0;
    for (size_t s = 0; s < cases.size(); ++s)
      for (int32_t p = cases[s].ctx - cases[s].q; p < cases[s].ctx; ++p, ++row)
        for (int64_t h = 0; h < hq; ++h) {
          const int64_t g = h / (hq / hk);
          const int32_t lo = window > 0 ? std::max(0, p - window + 1) : 0;
          std::vector<double> sc;
          double mx = -1e300;
          for (int32_t j = lo; j <= p; ++j) {
            double d = 0;
            for (int64_t i = 0; i < hd; ++i)
              d += static_cast<double>(q[(row * hq + h) * hd + i]) * K[s][(j * hk + g) * hd + i];
            sc.push_back(d * scale);
            mx = std::max(mx, sc.back());
          }
          double sum = 0;
          for (double& x : sc) sum += (x = std::exp(x - mx));
          for (int64_t i = 0; i < hd; ++i) {
            double ref = 0;
            for (int32_t j = lo; j <= p; ++j) ref += sc[j - lo] / sum * V[s][(j * hk + g) * hd + i];
            ASSERT_NEAR(got[(row * hq + h) * hd + i], ref, 2e-5)
                << "seq " << s << " pos " << p << " head " << h;
          }
        }
  }
};

const std::vector<SeqCase> kMixed = {{1, 1}, {19, 19}, {111, 5}, {989, 1}};

TEST_F(AttentionTest, MixedBatchGqa) { run(kMixed, 6, 2, 16, 0); }
TEST_F(AttentionTest, MixedBatchMultiHeadOddHeadDim) { run(kMixed, 3, 3, 19, 0); }
TEST_F(AttentionTest, MultiQuery) { run({{111, 111}, {19, 3}}, 4, 1, 8, 0); }
TEST_F(AttentionTest, SlidingWindow) {
  run(kMixed, 4, 2, 16, 7);
  run(kMixed, 4, 2, 16, 100);
}

TEST_F(AttentionTest, RefusesBlockOutsidePool) {
  StepMeta m;
  m.block_size = 4;
  m.positions = {0};
  m.slots = {0};
  m.seqs = {{0, 1, 1, 0}};
  m.block_tables = {9};
  ASSERT_TRUE(be_->begin_step(m).ok());
  KvCache cache{zeros({2, 4, 1, 8}), zeros({2, 4, 1, 8}), {}, {}};
  Tensor q = zeros({1, 1, 8}), out = zeros({1, 1, 8});
  auto st = be_->attention(q, cache, AttnSpec::causal(1.0f), out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("block id 9"), std::string::npos) << st.error().what();
}

TEST_F(AttentionTest, RefusesInconsistentStep) {
  StepMeta m;
  m.block_size = 4;
  m.positions = {0, 1};
  m.slots = {0, 1};
  m.seqs = {{0, 2, 1, 0}};  // q_len 2 > ctx_len 1
  m.block_tables = {0};
  EXPECT_FALSE(be_->begin_step(m).ok());
}

}  // namespace
}  // namespace spk::test
