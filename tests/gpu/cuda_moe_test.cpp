// Mixture-of-experts on CUDA against the CPU reference: the moe_ffn op at awkward sizes (expert widths
// differ, slots may be empty), then whole qwen3_moe / qwen2_moe / mixtral models decoding 64 greedy
// tokens teacher-forced with the CPU's tokens (a token may differ only at a near-tie of the CPU logits).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kernels/cuda/device_buffer.h"
#include "runtime/model/model.h"
#include "tests/model/random_moe_model.h"

namespace spk::test {
namespace {

using rt::Arch;

constexpr double kTieTol = 2e-2;
constexpr int kGenerate = 64;

std::vector<float> randn(std::mt19937_64& rng, size_t n, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = bf16_to_f32(f32_to_bf16(d(rng)));
  return v;
}

TEST(CudaMoe, FfnMatchesCpuAtAwkwardSizes) {
  std::string why;
  if (!cuda::cuda_device_available(&why)) GTEST_SKIP() << "gpu test skipped: " << why;
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  auto cpu = make_backend({.name = "cpu", .threads = 2});
  auto gpu = make_backend({.name = "cuda"});
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  struct Case {
    int n, d, k;
    std::vector<int> inters;
  };
  for (const Case& c : {Case{1, 64, 2, {19, 19, 19, 40}}, Case{19, 111, 3, {111, 1, 33, 64, 7}},
                        Case{111, 96, 4, {989 / 8, 48, 48, 48, 48, 48, 200}},
                        Case{5, 2048, 8, {768, 768, 768, 768, 768, 768, 768, 768, 768}}}) {
    SCOPED_TRACE("n " + std::to_string(c.n) + " d " + std::to_string(c.d) + " seed " + std::to_string(seed));
    // bf16 weights; the bytes live as long as the tensor (the CPU backend references them in place).
    auto put = [&](Backend& be, const std::vector<float>& v, std::vector<int64_t> shape) {
      auto b = std::make_shared<std::vector<uint16_t>>(v.size());
      for (size_t i = 0; i < v.size(); ++i) (*b)[i] = f32_to_bf16(v[i]);
      auto t = be.import_weight(b->data(), DType::bf16, std::move(shape), b, DType::bf16);
      EXPECT_TRUE(t.ok());
      return *t;
    };
    std::vector<std::vector<float>> raw;  // gate, up, down per expert
    for (int inter : c.inters)
      for (int m = 0; m < 3; ++m) raw.push_back(randn(rng, static_cast<size_t>(inter) * c.d, 0.1f));
    const int ne = static_cast<int>(c.inters.size());
    std::vector<int32_t> ids(static_cast<size_t>(c.n) * c.k);
    std::vector<float> w(ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      ids[i] = rng() % 7 == 0 ? -1 : static_cast<int32_t>(rng() % ne);
      w[i] = static_cast<float>(rng() % 1000) / 1000.0f;
    }
    const auto x = randn(rng, static_cast<size_t>(c.n) * c.d, 1.0f);
    std::vector<float> got, want;
    for (Backend* be : {cpu->get(), gpu->get()}) {
      std::vector<ExpertWeights> ex(ne);
      for (int e = 0; e < ne; ++e) {
        ex[e].gate = put(*be, raw[3 * e], {c.inters[e], c.d});
        ex[e].up = put(*be, raw[3 * e + 1], {c.inters[e], c.d});
        ex[e].down = put(*be, raw[3 * e + 2], {c.d, c.inters[e]});
      }
      auto X = be->alloc(DType::f32, {c.n, c.d});
      auto I = be->alloc(DType::i32, {c.n, c.k});
      auto W = be->alloc(DType::f32, {c.n, c.k});
      auto O = be->alloc(DType::f32, {c.n, c.d});
      ASSERT_TRUE(X.ok() && I.ok() && W.ok() && O.ok());
      ASSERT_TRUE(be->upload(*X, x.data(), x.size() * 4).ok());
      ASSERT_TRUE(be->upload(*I, ids.data(), ids.size() * 4).ok());
      ASSERT_TRUE(be->upload(*W, w.data(), w.size() * 4).ok());
      auto st = be->moe_ffn(*X, ex, *I, *W, *O);
      ASSERT_TRUE(st.ok()) << st.error().what();
      std::vector<float>& dst = be == cpu->get() ? want : got;
      dst.resize(x.size());
      ASSERT_TRUE(be->download(*O, dst.data(), dst.size() * 4).ok());
    }
    double mx = 0, err = 0;
    for (size_t i = 0; i < want.size(); ++i) mx = std::max(mx, std::fabs(double(want[i])));
    for (size_t i = 0; i < want.size(); ++i) err = std::max(err, std::fabs(double(got[i]) - want[i]));
    EXPECT_LE(err / std::max(mx, 1e-30), 1e-4) << "max abs err " << err << " of max " << mx;
  }
}

Result<std::vector<std::vector<float>>> decode(rt::Model& m, const std::vector<int32_t>& prompt,
                                               const std::vector<int32_t>* forced,
                                               std::vector<int32_t>& tokens) {
  const int V = m.config().vocab_size, bs = 16, total = static_cast<int>(prompt.size()) + kGenerate;
  SPK_TRY(m.allocate_kv((total + bs - 1) / bs, bs));
  rt::SeqSlice seq;
  for (int b = 0; b < (total + bs - 1) / bs; ++b) seq.block_table.push_back(b);
  std::vector<std::vector<float>> out;
  std::vector<int32_t> step = prompt;
  std::vector<float> logits;
  int ctx = 0;
  for (int i = 0; i < kGenerate; ++i) {
    rt::StepBatch b;
    b.tokens = step;
    for (size_t k = 0; k < step.size(); ++k) b.positions.push_back(ctx + static_cast<int>(k));
    ctx += static_cast<int>(step.size());
    seq.q_len = static_cast<int32_t>(step.size());
    seq.ctx_len = ctx;
    b.seqs = {seq};
    b.logit_rows = {seq.q_len - 1};
    SPK_TRY(m.forward(b, logits));
    out.emplace_back(logits.begin(), logits.begin() + V);
    tokens.push_back(
        static_cast<int32_t>(std::max_element(logits.begin(), logits.begin() + V) - logits.begin()));
    step = {forced ? (*forced)[i] : tokens.back()};
  }
  return out;
}

class CudaMoeModel : public ::testing::TestWithParam<Arch> {};

TEST_P(CudaMoeModel, GreedyTokensMatchCpuFor64Tokens) {
  std::string why;
  if (!cuda::cuda_device_available(&why)) GTEST_SKIP() << "gpu test skipped: " << why;
  rt::ModelConfig c = small_moe_config(GetParam());
  const uint64_t seed = std::random_device{}();
  auto weights = random_moe_weights(c, seed);
  auto cpu = rt::Model::load(c, weights, {.backend = "cpu", .threads = 2});
  auto gpu = rt::Model::load(c, weights, {.backend = "cuda"});
  ASSERT_TRUE(cpu.ok()) << cpu.error().what();
  ASSERT_TRUE(gpu.ok()) << gpu.error().what();
  std::mt19937_64 rng(seed);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 29; ++i) prompt.push_back(static_cast<int32_t>(rng() % c.vocab_size));
  std::vector<int32_t> want_tok, got_tok;
  auto want = decode(**cpu, prompt, nullptr, want_tok);
  ASSERT_TRUE(want.ok()) << want.error().what();
  auto got = decode(**gpu, prompt, &want_tok, got_tok);
  ASSERT_TRUE(got.ok()) << got.error().what();
  int exact = 0, near_ties = 0;
  double worst = 0;
  for (int i = 0; i < kGenerate; ++i) {
    const auto& r = (*want)[i];
    const auto& g = (*got)[i];
    double mx = 0, err = 0;
    for (size_t v = 0; v < r.size(); ++v) mx = std::max(mx, std::fabs(double(r[v])));
    for (size_t v = 0; v < r.size(); ++v) err = std::max(err, std::fabs(double(g[v]) - r[v]));
    worst = std::max(worst, err / mx);
    if (want_tok[i] == got_tok[i]) {
      ++exact;
    } else {
      ++near_ties;
      EXPECT_LE(r[want_tok[i]] - r[got_tok[i]], kTieTol * mx) << "step " << i << ": not a near-tie";
    }
  }
  std::printf("%s: %d/%d greedy tokens equal, %d near-ties, max rel logit err %.2e\n", c.architecture.c_str(),
              exact, kGenerate, near_ties, worst);
  EXPECT_LE(worst, 3e-2) << "seed " << seed;
  EXPECT_LE(near_ties * 100, kGenerate * 5) << "seed " << seed;
}

INSTANTIATE_TEST_SUITE_P(Families, CudaMoeModel,
                         ::testing::Values(Arch::qwen3_moe, Arch::qwen2_moe, Arch::mixtral),
                         [](const auto& i) { return std::string(rt::arch_name(i.param)); });

}  // namespace
}  // namespace spk::test
