// Multi-head latent attention on the CPU: mla_kv_write + mla_attention on both paths (reference up-projection
// and absorbed weights) against a naive double MLA over contiguous per-sequence latents, at awkward widths;
// the batch mixes a 1-token sequence, a full prefill, a chunked prefill over cached context and a decode over
// 989 cached tokens, with shuffled blocks. mla_rope against transformers' formula (interleaved or not).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernel_test_util.h"

namespace spk::test {
namespace {

struct SeqCase {
  int32_t ctx, q;
};

class MlaAttentionTest : public KernelTest {
 protected:
  void run(const std::vector<SeqCase>& cases, int64_t hq, MlaDims d) {
    SCOPED_TRACE(seed_note() + " hq=" + std::to_string(hq) + " kv_lora=" + std::to_string(d.kv_lora) +
                 " nope=" + std::to_string(d.nope) + " rope=" + std::to_string(d.rope) +
                 " v=" + std::to_string(d.v));
    const int32_t bs = 16;
    const int64_t L = d.kv_lora, R = d.rope, row = d.latent(), qk = d.qk(), Vd = d.v;
    int32_t total_blocks = 3;
    for (auto c : cases) total_blocks += (c.ctx + bs - 1) / bs;
    std::vector<int32_t> perm(total_blocks);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng_);
    KvCache cache{zeros({total_blocks, bs, 1, row}), {}, {}, {}};
    AttnSpec spec;
    spec.kind = AttnKind::mla;
    spec.mla = d;
    spec.scale = 0.37f;
    const std::vector<float> W = randn(hq * (d.nope + Vd) * L, 1.0f / std::sqrt(float(L)));
    std::vector<std::vector<float>> lat;  // per sequence [ctx, L + R]
    StepMeta all, cur;
    all.block_size = cur.block_size = bs;
    int32_t next = 0;
    for (auto c : cases) {
      lat.push_back(randn(int64_t{c.ctx} * row));
      std::vector<int32_t> table;
      for (int32_t b = 0; b < (c.ctx + bs - 1) / bs; ++b) table.push_back(perm[next++]);
      auto add = [&](StepMeta& m, int32_t from, int32_t to) {
        m.seqs.push_back({static_cast<int32_t>(m.positions.size()), to - from, to,
                          static_cast<int32_t>(m.block_tables.size())});
        for (int32_t p = from; p < to; ++p) {
          m.positions.push_back(p);
          m.slots.push_back(table[p / bs] * bs + p % bs);
        }
        m.block_tables.insert(m.block_tables.end(), table.begin(), table.end());
      };
      add(all, 0, c.ctx);
      add(cur, c.ctx - c.q, c.ctx);
    }
    // One step writes every position's latent; the next attends from the new tokens.
    const int64_t total = static_cast<int64_t>(all.positions.size());
    std::vector<float> latent, k_pe;
    for (const auto& s : lat)
      for (size_t j = 0; j < s.size() / row; ++j) {
        latent.insert(latent.end(), s.begin() + j * row, s.begin() + j * row + L);
        k_pe.insert(k_pe.end(), s.begin() + j * row + L, s.begin() + (j + 1) * row);
      }
    ASSERT_TRUE(be_->begin_step(all).ok());
    auto st = be_->mla_kv_write(f32(latent, {total, L}), f32(k_pe, {total, R}), cache, spec);
    ASSERT_TRUE(st.ok()) << st.error().what();
    ASSERT_TRUE(be_->begin_step(cur).ok());
    const int64_t n = static_cast<int64_t>(cur.positions.size());
    const std::vector<float> q = randn(n * hq * qk);
    // Naive double MLA: keys [W_uk c | k_pe], values W_uv c.
    std::vector<double> want(n * hq * Vd, 0.0);
    for (size_t s = 0; s < cases.size(); ++s)
      for (int32_t i = 0; i < cases[s].q; ++i) {
        const int64_t t = cur.seqs[s].q_start + i, pos = cur.positions[t];
        for (int64_t h = 0; h < hq; ++h) {
          const float* qv = q.data() + (t * hq + h) * qk;
          const float* Wk = W.data() + h * (d.nope + Vd) * L;
          std::vector<double> sc(pos + 1), kn(d.nope), vv(Vd);
          double mx = -1e300, sum = 0;
          for (int64_t j = 0; j <= pos; ++j) {
            const float* c = lat[s].data() + j * row;
            double dot = 0;
            for (int64_t a = 0; a < d.nope; ++a) {
              double k = 0;
              for (int64_t x = 0; x < L; ++x) k += double(Wk[a * L + x]) * c[x];
              dot += qv[a] * k;
            }
            for (int64_t x = 0; x < R; ++x) dot += double(qv[d.nope + x]) * c[L + x];
            mx = std::max(mx, sc[j] = dot * spec.scale);
          }
          for (double& x : sc) sum += (x = std::exp(x - mx));
          for (int64_t j = 0; j <= pos; ++j) {
            const float* c = lat[s].data() + j * row;
            for (int64_t b = 0; b < Vd; ++b) {
              double v = 0;
              for (int64_t x = 0; x < L; ++x) v += double(Wk[(d.nope + b) * L + x]) * c[x];
              want[(t * hq + h) * Vd + b] += sc[j] / sum * v;
            }
          }
        }
      }
    double mx = 0;
    for (double w : want) mx = std::max(mx, std::fabs(w));
    const Tensor qt = f32(q, {n, hq, qk}), wt = f32(W, {hq * (d.nope + Vd), L});
    for (MlaPath path : {MlaPath::reference, MlaPath::absorbed, MlaPath::automatic}) {
      spec.mla.path = path;
      Tensor out = zeros({n, hq, Vd});
      st = be_->mla_attention(qt, cache, wt, spec, out);
      ASSERT_TRUE(st.ok()) << st.error().what();
      std::vector<float> got(n * hq * Vd);
      ASSERT_TRUE(be_->download(out, got.data(), got.size() * 4).ok());
      double err = 0;
      for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::fabs(got[i] - want[i]));
      EXPECT_LE(err / std::max(mx, 1e-30), 2e-5) << "path " << static_cast<int>(path);
    }
  }
};

TEST_F(MlaAttentionTest, BothPathsMatchNaiveUpProjection) {
  const std::vector<SeqCase> mixed = {{1, 1}, {19, 19}, {111, 5}, {989, 1}};
  MlaDims d;
  d.kv_lora = 19, d.nope = 11, d.rope = 6, d.v = 7;
  run(mixed, 3, d);
  d.kv_lora = 64, d.nope = 16, d.rope = 8, d.v = 16;
  run({{1, 1}, {37, 2}}, 1, d);
}

TEST_F(MlaAttentionTest, RopeFollowsTransformersLayout) {
  SCOPED_TRACE(seed_note());
  const int64_t n = 19, hq = 3, nope = 5, R = 8;
  StepMeta m;
  m.block_size = 16;
  m.seqs.push_back({0, int32_t(n), int32_t(n + 100), 0});
  for (int64_t t = 0; t < n; ++t) m.positions.push_back(int32_t(100 + t)), m.slots.push_back(int32_t(t));
  for (int b = 0; b < 8; ++b) m.block_tables.push_back(b);
  ASSERT_TRUE(be_->begin_step(m).ok());
  const std::vector<float> inv = {1.0f, 0.3f, 0.05f, 0.001f};
  for (bool interleave : {true, false}) {
    AttnSpec spec;
    spec.kind = AttnKind::mla;
    spec.mla.nope = nope, spec.mla.rope = R, spec.mla.interleave = interleave, spec.mla.rope_factor = 1.25f;
    const std::vector<float> q0 = randn(n * hq * (nope + R)), k0 = randn(n * R);
    Tensor q = f32(q0, {n, hq, nope + R}), k = f32(k0, {n, R});
    auto st = be_->mla_rope(q, k, f32(inv, {R / 2}), spec);
    ASSERT_TRUE(st.ok()) << st.error().what();
    std::vector<float> qg(q0.size()), kg(k0.size());
    ASSERT_TRUE(be_->download(q, qg.data(), qg.size() * 4).ok() &&
                be_->download(k, kg.data(), kg.size() * 4).ok());
    auto check = [&](const float* x0, const float* got, int64_t pos) {
      double y[R];  // transformers: view(d/2, 2).transpose -> evens then odds; then rotate_half
      for (int64_t i = 0; i < R / 2; ++i)
        y[i] = interleave ? x0[2 * i] : x0[i], y[R / 2 + i] = interleave ? x0[2 * i + 1] : x0[R / 2 + i];
      for (int64_t i = 0; i < R / 2; ++i) {
        const double a = double(float(pos) * inv[i]), c = std::cos(a) * 1.25, s = std::sin(a) * 1.25;
        EXPECT_NEAR(got[i], y[i] * c - y[R / 2 + i] * s, 1e-5);
        EXPECT_NEAR(got[R / 2 + i], y[R / 2 + i] * c + y[i] * s, 1e-5);
      }
    };
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t o = (t * hq + h) * (nope + R);
        for (int64_t i = 0; i < nope; ++i) EXPECT_EQ(qg[o + i], q0[o + i]) << "the nope part is left alone";
        check(q0.data() + o + nope, qg.data() + o + nope, 100 + t);
      }
      check(k0.data() + t * R, kg.data() + t * R, 100 + t);
    }
  }
}

}  // namespace
}  // namespace spk::test
