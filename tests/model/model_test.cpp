// The model graph on the CPU backend: agrees with a naive double forward for every architecture, and
// the KV cache, batching and paging never change the result.
#include "runtime/model/model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "random_model.h"

namespace spk::test {
namespace {

using rt::Arch;
using rt::StepBatch;

const Arch kArchs[] = {Arch::llama, Arch::mistral, Arch::qwen2, Arch::qwen3};

std::unique_ptr<rt::Model> make_model(Arch arch, uint64_t seed, int blocks = 64, int block_size = 4) {
  auto m = rt::Model::load(small_config(arch), random_weights(small_config(arch), seed), {.threads = 2});
  EXPECT_TRUE(m.ok()) << m.error().what();
  if (!m.ok()) return nullptr;
  EXPECT_TRUE((*m)->allocate_kv(blocks, block_size).ok());
  return std::move(m).value();
}

std::vector<int32_t> random_tokens(std::mt19937_64& rng, int n, int vocab) {
  std::vector<int32_t> t(n);
  for (auto& x : t) x = std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng);
  return t;
}

// One sequence's step: new tokens [from, to) of `tokens`, blocks `table`, logits of the last row.
void add_seq(StepBatch& b, const std::vector<int32_t>& tokens, int from, int to, std::vector<int32_t> table,
             bool all_logits = false) {
  rt::SeqSlice s;
  s.q_start = static_cast<int32_t>(b.tokens.size());
  s.q_len = to - from;
  s.ctx_len = to;
  s.block_table = std::move(table);
  for (int p = from; p < to; ++p) {
    if (all_logits || p == to - 1) b.logit_rows.push_back(static_cast<int32_t>(b.tokens.size()));
    b.tokens.push_back(tokens[p]);
    b.positions.push_back(p);
  }
  b.seqs.push_back(std::move(s));
}

std::vector<int32_t> iota_blocks(int first, int count) {
  std::vector<int32_t> v(count);
  std::iota(v.begin(), v.end(), first);
  return v;
}

double max_rel_err(const float* got, const float* want, int n) {
  double mx = 0, err = 0;
  for (int i = 0; i < n; ++i) mx = std::max(mx, std::fabs(static_cast<double>(want[i])));
  for (int i = 0; i < n; ++i) err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
  return err / std::max(mx, 1e-30);
}

class ModelTest : public ::testing::TestWithParam<Arch> {
 protected:
  void SetUp() override {
    seed_ = std::random_device{}();
    if (const char* e = std::getenv("SPARKCTL_TEST_SEED"); e && *e) seed_ = std::strtoull(e, nullptr, 10);
    rng_.seed(seed_);
  }
  std::string note() const {
    return std::string(rt::arch_name(GetParam())) + " seed " + std::to_string(seed_) +
           " (replay: SPARKCTL_TEST_SEED=" + std::to_string(seed_) + ")";
  }
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
};

// Every position's logits of one 19-token prefill against the naive double forward.
TEST_P(ModelTest, MatchesNaiveDoubleReference) {
  SCOPED_TRACE(note());
  const auto cfg = small_config(GetParam());
  auto weights = random_weights(cfg, seed_);
  auto m = rt::Model::load(cfg, weights, {.threads = 2});
  ASSERT_TRUE(m.ok()) << m.error().what();
  ASSERT_TRUE((*m)->allocate_kv(8, 4).ok());
  const auto tokens = random_tokens(rng_, 19, cfg.vocab_size);
  StepBatch b;
  add_seq(b, tokens, 0, 19, iota_blocks(0, 5), /*all_logits=*/true);
  std::vector<float> logits;
  auto st = (*m)->forward(b, logits);
  ASSERT_TRUE(st.ok()) << st.error().what();
  const auto want = ref::forward(cfg, *weights, tokens);
  for (int t = 0; t < 19; ++t) {
    std::vector<float> w(want[t].begin(), want[t].end());
    EXPECT_LE(max_rel_err(logits.data() + t * cfg.vocab_size, w.data(), cfg.vocab_size), 1e-5)
        << "position " << t;
  }
}

// (a) prefill N then decode 1 == prefill N+1, and a chunked prefill (7 + 5 + 1) too.
TEST_P(ModelTest, DecodeAfterPrefillEqualsLongerPrefill) {
  SCOPED_TRACE(note());
  const int V = small_config(GetParam()).vocab_size;
  const auto tokens = random_tokens(rng_, 13, V);
  auto full = make_model(GetParam(), seed_);
  ASSERT_TRUE(full);
  StepBatch one;
  add_seq(one, tokens, 0, 13, iota_blocks(0, 4));
  std::vector<float> want, got;
  ASSERT_TRUE(full->forward(one, want).ok());

  auto inc = make_model(GetParam(), seed_);
  for (auto [from, to] : {std::pair{0, 12}, {12, 13}}) {
    StepBatch b;
    add_seq(b, tokens, from, to, iota_blocks(0, 4));
    ASSERT_TRUE(inc->forward(b, got).ok());
  }
  EXPECT_LE(max_rel_err(got.data(), want.data(), V), 1e-5);

  auto chunked = make_model(GetParam(), seed_);
  for (auto [from, to] : {std::pair{0, 7}, {7, 12}, {12, 13}}) {
    StepBatch b;
    add_seq(b, tokens, from, to, iota_blocks(0, 4));
    ASSERT_TRUE(chunked->forward(b, got).ok());
  }
  EXPECT_LE(max_rel_err(got.data(), want.data(), V), 1e-5);
}

// (b) three sequences of different lengths (a prefill, a decode over cached context, a 1-token prompt)
// in one step give the logits each gives alone.
TEST_P(ModelTest, BatchingNeverChangesResults) {
  SCOPED_TRACE(note());
  const int V = small_config(GetParam()).vocab_size;
  const auto a = random_tokens(rng_, 11, V), b = random_tokens(rng_, 6, V), c = random_tokens(rng_, 1, V);
  // Alone.
  std::vector<std::vector<float>> alone;
  {
    auto m = make_model(GetParam(), seed_);
    std::vector<float> l;
    StepBatch s1;
    add_seq(s1, a, 0, 11, iota_blocks(0, 3));
    ASSERT_TRUE(m->forward(s1, l).ok());
    alone.push_back(l);
    StepBatch s2;
    add_seq(s2, b, 0, 5, iota_blocks(3, 2));
    ASSERT_TRUE(m->forward(s2, l).ok());
    StepBatch s3;
    add_seq(s3, b, 5, 6, iota_blocks(3, 2));
    ASSERT_TRUE(m->forward(s3, l).ok());
    alone.push_back(l);
    StepBatch s4;
    add_seq(s4, c, 0, 1, iota_blocks(5, 1));
    ASSERT_TRUE(m->forward(s4, l).ok());
    alone.push_back(l);
  }
  // Together: b's first 5 tokens cached in an earlier step, then one step with all three.
  auto m = make_model(GetParam(), seed_);
  std::vector<float> l;
  StepBatch pre;
  add_seq(pre, b, 0, 5, iota_blocks(3, 2));
  ASSERT_TRUE(m->forward(pre, l).ok());
  StepBatch all;
  add_seq(all, a, 0, 11, iota_blocks(0, 3));
  add_seq(all, b, 5, 6, iota_blocks(3, 2));
  add_seq(all, c, 0, 1, iota_blocks(5, 1));
  ASSERT_TRUE(m->forward(all, l).ok());
  ASSERT_EQ(l.size(), 3u * V);
  for (int s = 0; s < 3; ++s)
    EXPECT_LE(max_rel_err(l.data() + s * V, alone[s].data(), V), 1e-5) << "sequence " << s;
}

// (c) the same sequence over shuffled, non-contiguous blocks (block size 4, 17 tokens = 5 blocks).
TEST_P(ModelTest, NonContiguousBlockTables) {
  SCOPED_TRACE(note());
  const int V = small_config(GetParam()).vocab_size;
  const auto tokens = random_tokens(rng_, 17, V);
  std::vector<float> want, got;
  auto m1 = make_model(GetParam(), seed_);
  for (auto [from, to] : {std::pair{0, 10}, {10, 16}, {16, 17}}) {
    StepBatch b;
    add_seq(b, tokens, from, to, iota_blocks(0, 5));
    ASSERT_TRUE(m1->forward(b, want).ok());
  }
  auto table = iota_blocks(0, 64);
  std::shuffle(table.begin(), table.end(), rng_);
  table.resize(5);
  auto m2 = make_model(GetParam(), seed_);
  for (auto [from, to] : {std::pair{0, 10}, {10, 16}, {16, 17}}) {
    StepBatch b;
    add_seq(b, tokens, from, to, table);
    ASSERT_TRUE(m2->forward(b, got).ok());
  }
  EXPECT_LE(max_rel_err(got.data(), want.data(), V), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Arch, ModelTest, ::testing::ValuesIn(kArchs),
                         [](const auto& info) { return std::string(rt::arch_name(info.param)); });

TEST(ModelErrors, BadBatchesAreRefusedWithTheValue) {
  auto m = make_model(Arch::qwen3, 1, 4, 4);
  ASSERT_TRUE(m);
  std::vector<float> l;
  StepBatch b;
  add_seq(b, {1, 2, 3}, 0, 3, {7});  // block 7 of a 4-block pool
  auto st = m->forward(b, l);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("block id 7"), std::string::npos) << st.error().what();
  StepBatch c;
  add_seq(c, {1, 500}, 0, 2, {0});
  st = m->forward(c, l);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("token id 500"), std::string::npos) << st.error().what();
  StepBatch d;
  add_seq(d, {1, 2, 3, 4, 5}, 0, 5, {0});  // 5 tokens need 2 blocks of 4
  EXPECT_FALSE(m->forward(d, l).ok());
}

TEST(ModelErrors, MissingTensorIsNamed) {
  auto cfg = small_config(Arch::llama);
  auto w = random_weights(small_config(Arch::qwen2), 1);  // no bias expected... but lm_head present
  cfg.num_hidden_layers = 3;                              // layer 2 does not exist
  auto m = rt::Model::load(cfg, w, {});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("model.layers.2."), std::string::npos) << m.error().what();
}

TEST(ModelErrors, ShapeMismatchNamesTensorAndShapes) {
  auto cfg = small_config(Arch::mistral);
  auto w = random_weights(cfg, 1);
  cfg.intermediate_size = 80;
  auto m = rt::Model::load(cfg, w, {});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("mlp.gate_proj.weight' has shape [96, 64]"), std::string::npos)
      << m.error().what();
}

TEST(ModelErrors, ForwardBeforeAllocateKv) {
  auto m = rt::Model::load(small_config(Arch::qwen2), random_weights(small_config(Arch::qwen2), 1), {});
  ASSERT_TRUE(m.ok());
  StepBatch b;
  add_seq(b, {1}, 0, 1, {0});
  std::vector<float> l;
  EXPECT_FALSE((*m)->forward(b, l).ok());
}

}  // namespace
}  // namespace spk::test
