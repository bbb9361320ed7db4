// Fused == unfused: each fusion rule of the CUDA backend (kernels/cuda/fusion/peepholes.h) and each launch
// mode has an off-switch (kernels/knobs.h); a decoder-layer-shaped model run with the switch off must give
// the logits and greedy tokens of the run with every rule on. The run is a prefill step, decode steps of
// two sequences (the batched GEMV, grouped and fused) and of one (batch 1), with lm_head and sampling, so
// every rule fires at least once with its defaults.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/knobs.h"
#include "tests/gpu/assert_ok.h"

namespace {

using spk::Backend;
using spk::DType;
using spk::Tensor;

constexpr int kVocab = 1000, kHidden = 256, kHq = 4, kHk = 2, kHd = 64, kInter = 344, kBlock = 16;

struct Weights {
  std::vector<uint16_t> emb, q, k, v, o, gate, up, down, head;
  std::vector<float> n1, n2, nf;
};

std::vector<uint16_t> rnd_bf16(std::mt19937_64& rng, size_t n, float sd) {
  std::normal_distribution<float> nd(0.0f, sd);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = spk::f32_to_bf16(nd(rng));
  return v;
}

Weights make_weights(uint64_t seed) {
  std::mt19937_64 rng(seed);
  Weights w;
  w.emb = rnd_bf16(rng, size_t(kVocab) * kHidden, 1.0f);
  w.q = rnd_bf16(rng, size_t(kHq) * kHd * kHidden, 0.06f);
  w.k = rnd_bf16(rng, size_t(kHk) * kHd * kHidden, 0.06f);
  w.v = rnd_bf16(rng, size_t(kHk) * kHd * kHidden, 0.06f);
  w.o = rnd_bf16(rng, size_t(kHidden) * kHq * kHd, 0.06f);
  w.gate = rnd_bf16(rng, size_t(kInter) * kHidden, 0.06f);
  w.up = rnd_bf16(rng, size_t(kInter) * kHidden, 0.06f);
  w.down = rnd_bf16(rng, size_t(kHidden) * kInter, 0.06f);
  w.head = rnd_bf16(rng, size_t(kVocab) * kHidden, 0.06f);
  std::normal_distribution<float> nd(1.0f, 0.1f);
  for (auto* n : {&w.n1, &w.n2, &w.nf}) {
    n->resize(kHidden);
    for (auto& x : *n) x = nd(rng);
  }
  return w;
}

// Logits of every step's last rows, then the greedy ids, for the whole run.
struct RunOut {
  std::vector<float> logits;
  std::vector<int32_t> ids;
};

void run_model(Backend& be, const Weights& W, RunOut& out) {
  auto imp = [&](const std::vector<uint16_t>& w, int64_t rows, int64_t cols) {
    auto t = be.import_weight(w.data(), DType::bf16, {rows, cols}, nullptr, DType::bf16);
    EXPECT_TRUE(t.ok());
    return *t;
  };
  auto impf = [&](const std::vector<float>& w) {
    auto t = be.import_weight(w.data(), DType::f32, {int64_t(w.size())}, nullptr, DType::f32);
    EXPECT_TRUE(t.ok());
    return *t;
  };
  auto alloc = [&](DType dt, std::vector<int64_t> s) {
    auto t = be.alloc(dt, std::move(s));
    EXPECT_TRUE(t.ok());
    return *t;
  };
  const Tensor E = imp(W.emb, kVocab, kHidden), Q = imp(W.q, kHq * kHd, kHidden),
               K = imp(W.k, kHk * kHd, kHidden), V = imp(W.v, kHk * kHd, kHidden),
               O = imp(W.o, kHidden, kHq * kHd), G = imp(W.gate, kInter, kHidden),
               U = imp(W.up, kInter, kHidden), D = imp(W.down, kHidden, kInter),
               H = imp(W.head, kVocab, kHidden), n1 = impf(W.n1), n2 = impf(W.n2), nf = impf(W.nf);
  const Tensor invf = impf(spk::rope_inv_freq(kHd, 10000.0, nullptr));
  const spk::AttnSpec attn = spk::AttnSpec::causal(1.0f / 8.0f);
  spk::KvCache cache{
      alloc(DType::bf16, {8, kBlock, kHk, kHd}), alloc(DType::bf16, {8, kBlock, kHk, kHd}), {}, {}};
  const std::vector<int32_t> tables = {5, 2, 7, 0, 3, 6, 1, 4};  // seq 0: 5 2 7 0, seq 1: 3 6 1 4
  // Steps: (new tokens of seq 0, of seq 1); contexts grow from the prefill of 9 and 20 tokens.
  const std::vector<std::pair<int, int>> steps = {{9, 20}, {1, 1}, {1, 1}, {1, 1}, {1, 0}, {1, 0}, {1, 0}};
  int ctx[2] = {0, 0};
  uint32_t tok = 17;
  for (auto [a, b] : steps) {
    spk::StepMeta meta;
    meta.block_size = kBlock;
    meta.block_tables = tables;
    std::vector<int32_t> ids, last;
    const int q_len[2] = {a, b};
    int row = 0;
    for (int s = 0; s < 2; ++s) {
      if (q_len[s] == 0) continue;
      ctx[s] += q_len[s];
      meta.seqs.push_back({row, q_len[s], ctx[s], 4 * s});
      for (int p = ctx[s] - q_len[s]; p < ctx[s]; ++p, ++row) {
        meta.positions.push_back(p);
        meta.slots.push_back(tables[4 * s + p / kBlock] * kBlock + p % kBlock);
        tok = tok * 1103515245u + 12345u;
        ids.push_back(int32_t(tok % kVocab));
      }
      last.push_back(row - 1);
    }
    const int64_t n = row, m = int64_t(last.size());
    Tensor tid = alloc(DType::i32, {n}), resid = alloc(DType::f32, {n, kHidden}),
           h = alloc(DType::f32, {n, kHidden}), q = alloc(DType::f32, {n, kHq, kHd}),
           k = alloc(DType::f32, {n, kHk, kHd}), v = alloc(DType::f32, {n, kHk, kHd}),
           att = alloc(DType::f32, {n, kHq, kHd}), delta = alloc(DType::f32, {n, kHidden}),
           g = alloc(DType::f32, {n, kInter}), u = alloc(DType::f32, {n, kInter}),
           act = alloc(DType::f32, {n, kInter}), rows = alloc(DType::i32, {m}),
           lastx = alloc(DType::f32, {m, kHidden}), logits = alloc(DType::f32, {m, kVocab});
    ASSERT_OK(be.begin_step(meta));
    ASSERT_OK(be.upload(tid, ids.data(), ids.size() * 4));
    ASSERT_OK(be.upload(rows, last.data(), last.size() * 4));
    ASSERT_OK(be.embedding(E, tid, resid));
    for (int layer = 0; layer < 2; ++layer) {  // the same weights twice: residual add + norm between layers
      if (layer == 0)
        ASSERT_OK(be.rmsnorm(resid, n1, 1e-6f, h));
      else
        ASSERT_OK(be.add_rmsnorm(resid, delta, n1, 1e-6f, h));
      Tensor q2 = q.reshape({n, kHq * kHd}), k2 = k.reshape({n, kHk * kHd}), v2 = v.reshape({n, kHk * kHd});
      ASSERT_OK(be.linear(h, Q, nullptr, q2));
      ASSERT_OK(be.linear(h, K, nullptr, k2));
      ASSERT_OK(be.linear(h, V, nullptr, v2));
      ASSERT_OK(be.rope(q, k, invf));
      ASSERT_OK(be.kv_write(k, v, cache));
      ASSERT_OK(be.attention(q, cache, attn, att));
      ASSERT_OK(be.linear(att.reshape({n, kHq * kHd}), O, nullptr, delta));
      ASSERT_OK(be.add_rmsnorm(resid, delta, n2, 1e-6f, h));
      ASSERT_OK(be.linear(h, G, nullptr, g));
      ASSERT_OK(be.linear(h, U, nullptr, u));
      ASSERT_OK(be.silu_mul(g, u, act));
      ASSERT_OK(be.linear(act, D, nullptr, delta));
      ASSERT_OK(be.submit());
    }
    ASSERT_OK(be.add_rmsnorm(resid, delta, nf, 1e-6f, h));
    ASSERT_OK(be.gather_rows(h, rows, lastx));
    ASSERT_OK(be.linear(lastx, H, nullptr, logits));
    std::vector<spk::SampleRow> srows(static_cast<size_t>(m));
    std::vector<spk::SampledToken> toks;
    ASSERT_OK(be.sample(logits, srows, toks));
    std::vector<float> lh(size_t(m) * kVocab);
    ASSERT_OK(be.download(logits, lh.data(), lh.size() * 4));
    for (int64_t r = 0; r < m; ++r) {
      int32_t id = toks[r].id;
      if (toks[r].host)  // the row came back: the caller's argmax
        id = int32_t(std::max_element(lh.begin() + r * kVocab, lh.begin() + (r + 1) * kVocab) -
                     (lh.begin() + r * kVocab));
      out.ids.push_back(id);
    }
    out.logits.insert(out.logits.end(), lh.begin(), lh.end());
  }
}

RunOut run_with(const char* knob_off, const Weights& W) {
  if (knob_off) setenv(knob_off, "0", 1);
  auto be = spk::make_backend({"cuda", 0});
  if (knob_off) unsetenv(knob_off);
  RunOut out;
  EXPECT_TRUE(be.ok()) << be.error().what();
  if (be.ok()) run_model(**be, W, out);
  return out;
}

// Every fusion rule's off-switch and the launch modes (kernels/knobs.h), each turned off alone.
constexpr const char* kSwitches[] = {
    "SPARKCTL_GEMV_GROUP",     "SPARKCTL_NORM_FUSE",      "SPARKCTL_RESIDUAL_FUSE",  "SPARKCTL_SWIGLU_FUSE",
    "SPARKCTL_ARGMAX_FUSE",    "SPARKCTL_ROPE_FUSE",      "SPARKCTL_ATTN_ROPE_FUSE", "SPARKCTL_STAGING_REUSE",
    "SPARKCTL_QUEUED_UPLOADS", "SPARKCTL_SHARED_KV_ATTN", "SPARKCTL_SPLIT_MERGE",    "SPARKCTL_STEP_CHUNKS",
    "SPARKCTL_CUDA_GRAPHS"};

TEST(CudaFusion, EveryRuleOffGivesTheFusedResult) {
  std::string why;
  if (!spk::cuda::cuda_device_available(&why)) GTEST_SKIP() << "gpu test skipped: " << why;
  for (const char* k : kSwitches)
    ASSERT_EQ(std::getenv(k), nullptr) << k << " is set in this test's environment: unset it";
  const Weights W = make_weights(7);
  const RunOut fused = run_with(nullptr, W);
  ASSERT_FALSE(fused.logits.empty());
  for (const char* k : kSwitches) {
    const RunOut off = run_with(k, W);
    ASSERT_EQ(off.logits.size(), fused.logits.size()) << k << "=0";
    double num = 0, den = 0;
    for (size_t i = 0; i < fused.logits.size(); ++i) {
      const double d = double(off.logits[i]) - fused.logits[i];
      num += d * d, den += double(fused.logits[i]) * fused.logits[i];
    }
    // Same math in another order (a norm inside the GEMV, rope inside attention): fp32 rounding only.
    EXPECT_LT(std::sqrt(num / den), 2e-3) << k << "=0 changes the logits";
    for (size_t r = 0; r < fused.ids.size(); ++r) {
      const float* row = fused.logits.data() + r * kVocab;
      const float gap = std::fabs(row[fused.ids[r]] - row[off.ids[r]]);
      EXPECT_TRUE(off.ids[r] == fused.ids[r] || gap < 1e-3f)
          << k << "=0 picks token " << off.ids[r] << " where the fused run picks " << fused.ids[r] << " (row "
          << r << ")";
    }
  }
}

}  // namespace
