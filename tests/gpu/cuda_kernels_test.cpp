// Every CUDA op against a double-precision CPU reference on fresh random inputs at awkward sizes
// (1, 19, 111, 989). The seed is printed on failure. Skips (and says why) where no GPU is present.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/linear/gemm.h"
#include "kernels/dtype.h"
#include "tests/gpu/assert_ok.h"

namespace {

using spk::cuda::bf16;
using spk::cuda::DeviceBuffer;

#define REQUIRE_GPU()                                                                         \
  do {                                                                                        \
    std::string why;                                                                          \
    if (!spk::cuda::cuda_device_available(&why)) GTEST_SKIP() << "gpu test skipped: " << why; \
  } while (0)

uint64_t fresh_seed() { return std::random_device{}(); }

std::vector<float> randn(size_t n, std::mt19937_64& rng, float scale = 1.0f) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// bf16 round trip on the host, so references see exactly what the device sees.
std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> o(v.size());
  for (size_t i = 0; i < v.size(); ++i) o[i] = spk::f32_to_bf16(v[i]);
  return o;
}
float bf(uint16_t h) { return spk::bf16_to_f32(h); }

template <class T>
DeviceBuffer<T> dev(const std::vector<T>& h) {
  DeviceBuffer<T> b;
  EXPECT_TRUE(b.upload(h).ok());
  return b;
}
DeviceBuffer<bf16> dev_bf16(const std::vector<uint16_t>& h) {
  DeviceBuffer<bf16> b;
  EXPECT_TRUE(b.alloc(h.size()).ok());
  if (!h.empty()) cudaMemcpy(b.get(), h.data(), h.size() * 2, cudaMemcpyHostToDevice);
  return b;
}
std::vector<float> host(const DeviceBuffer<float>& b) {
  std::vector<float> h;
  EXPECT_TRUE(b.download(h).ok());
  return h;
}

// ||a - b|| / ||b||
double rel_err(const std::vector<float>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    if (std::isnan(a[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

const int kSizes[] = {1, 19, 111, 989};

// 9001 rows: more row groups than the SMs hold at once, so blocks take several groups in turn.
const int kGemvRows[] = {1, 19, 111, 989, 9001};

TEST(CudaKernels, GemvMatchesReference) {
  REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (int n : kGemvRows)
    for (int k8 : kSizes)
      for (int batch : {1, 3, 8}) {
        const int K = k8 * 8;
        auto W = to_bf16(randn(static_cast<size_t>(n) * K, rng, 0.05f));
        auto bias = randn(n, rng);
        auto x = randn(static_cast<size_t>(batch) * K, rng);
        auto dW = dev_bf16(W);
        auto db = dev(bias);
        auto dx = dev(x);
        DeviceBuffer<float> dy;
        ASSERT_OK(dy.upload(std::vector<float>(static_cast<size_t>(batch) * n, NAN)));  // poison
        ASSERT_OK(spk::cuda::gemv_bf16(dW.get(), db.get(), dx.get(), batch, n, K, dy.get(), nullptr));
        std::vector<double> ref(static_cast<size_t>(batch) * n);
        for (int b = 0; b < batch; ++b)
          for (int r = 0; r < n; ++r) {
            double s = bias[r];
            for (int c = 0; c < K; ++c) s += double(bf(W[size_t(r) * K + c])) * x[size_t(b) * K + c];
            ref[size_t(b) * n + r] = s;
          }
        // fp32 sums of ~8k products: one output row alone (N = 1) reached 1.0014e-5 (seed 1972614319,
        // K = 7912); wider outputs average the rounding out.
        EXPECT_LT(rel_err(host(dy), ref), n == 1 ? 3e-5 : 1e-5)
            << "seed=" << seed << " N=" << n << " K=" << K << " B=" << batch;
      }
}

// The lm_head's argmax folded into its GEMV (GemvFusion::argmax) and read by the sampler: every row's id is
// the argmax of the logits the GEMV wrote (exact ties to the lowest id, NaN rows lose), the greedy rows
// that want a logprob still get it from the full scan, and the slots are left zero for the next step.
TEST(CudaKernels, GemvArgmaxFeedsTheSampler) {
  REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (int n : {1, 97, 9001, 128256})
    for (int batch : {1, 2, 5}) {
      const int K = 64;
      auto Wf = randn(static_cast<size_t>(n) * K, rng, 0.05f);
      if (n > 10) {  // an exact tie: two equal rows (the later one must lose), and a NaN row
        const size_t a = rng() % (n / 2), b = n / 2 + rng() % (n / 2);
        std::copy_n(Wf.begin() + b * K, K, Wf.begin() + a * K);
        Wf[(rng() % n) * K] = NAN;
      }
      auto W = to_bf16(Wf);
      auto x = randn(static_cast<size_t>(batch) * K, rng);
      auto dW = dev_bf16(W);
      auto dx = dev(x);
      DeviceBuffer<float> dy;
      ASSERT_OK(dy.alloc(static_cast<size_t>(batch) * n));
      DeviceBuffer<unsigned long long> slots;
      ASSERT_OK(slots.upload(std::vector<unsigned long long>(size_t(batch) * spk::cuda::kArgmaxSlots, 0)));
      spk::cuda::GemvFusion f;
      f.argmax = slots.get();
      const spk::cuda::GemvSegment seg{dW.get(), nullptr, dy.get(), n};
      ASSERT_OK(spk::cuda::gemv_bf16_fused(&seg, 1, dx.get(), batch, K, f, nullptr));
      std::vector<spk::cuda::DeviceSampleRow> rows(batch);
      for (int b = 0; b < batch; ++b) rows[b] = {0.0f, 0, 1.0f, 0.0f, 0.5, b == 1 ? 1 : 0, 0};
      DeviceBuffer<spk::cuda::DeviceSampleRow> drows;
      ASSERT_OK(drows.upload(rows));
      DeviceBuffer<spk::cuda::DeviceSampleOut> dout;
      ASSERT_OK(dout.alloc(batch));
      ASSERT_OK(spk::cuda::sample_rows(dy.get(), batch, n, drows.get(), dout.get(), nullptr, slots.get()));
      std::vector<spk::cuda::DeviceSampleOut> out;
      ASSERT_OK(dout.download(out));
      const std::vector<float> y = host(dy);
      for (int b = 0; b < batch; ++b) {
        int best = 0;
        auto val = [&](int i) {
          const float v = y[size_t(b) * n + i];
          return std::isnan(v) ? -INFINITY : v;
        };
        for (int i = 1; i < n; ++i)
          if (val(i) > val(best)) best = i;
        EXPECT_EQ(out[b].id, best) << "seed=" << seed << " N=" << n << " batch=" << batch << " row " << b;
        EXPECT_EQ(out[b].host, 0);
      }
      std::vector<unsigned long long> left;
      ASSERT_OK(slots.download(left));
      for (auto v : left) ASSERT_EQ(v, 0u) << "seed=" << seed << " N=" << n << ": slots not cleared";
    }
}

// gate/up GEMVs + silu(gate) * up in one launch: all three outputs against the reference.
TEST(CudaKernels, SwigluGemvMatchesReference) {
  REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (int n : kGemvRows)
    for (int k8 : {1, 111})
      for (int batch : {1, 2, 5, 8}) {
        const int K = k8 * 8;
        auto Wg = to_bf16(randn(static_cast<size_t>(n) * K, rng, 0.05f));
        auto Wu = to_bf16(randn(static_cast<size_t>(n) * K, rng, 0.05f));
        auto bias = randn(n, rng);
        auto x = randn(static_cast<size_t>(batch) * K, rng);
        auto dWg = dev_bf16(Wg), dWu = dev_bf16(Wu);
        auto db = dev(bias);
        auto dx = dev(x);
        const std::vector<float> poison(static_cast<size_t>(batch) * n, NAN);
        DeviceBuffer<float> dg, du, dout;
        ASSERT_OK(dg.upload(poison));
        ASSERT_OK(du.upload(poison));
        ASSERT_OK(dout.upload(poison));
        const spk::cuda::GemvSegment gate{dWg.get(), db.get(), dg.get(), n},
            up{dWu.get(), nullptr, du.get(), n};
        const spk::cuda::GemvSegment segs[2] = {gate, up};
        spk::cuda::GemvFusion f;
        f.swiglu_out = dout.get();
        ASSERT_OK(spk::cuda::gemv_bf16_fused(segs, 2, dx.get(), batch, K, f, nullptr));
        std::vector<double> rg(poison.size()), ru(poison.size()), ro(poison.size());
        for (int b = 0; b < batch; ++b)
          for (int r = 0; r < n; ++r) {
            double sg = bias[r], su = 0;
            for (int c = 0; c < K; ++c) {
              sg += double(bf(Wg[size_t(r) * K + c])) * x[size_t(b) * K + c];
              su += double(bf(Wu[size_t(r) * K + c])) * x[size_t(b) * K + c];
            }
            const size_t i = size_t(b) * n + r;
            rg[i] = sg;
            ru[i] = su;
            ro[i] = sg / (1.0 + std::exp(-sg)) * su;
          }
        const std::string what = "seed=" + std::to_string(seed) + " N=" + std::to_string(n) +
                                 " K=" + std::to_string(K) + " B=" + std::to_string(batch);
        EXPECT_LT(rel_err(host(dg), rg), 1e-5) << "gate " << what;
        EXPECT_LT(rel_err(host(du), ru), 1e-5) << "up " << what;
        EXPECT_LT(rel_err(host(dout), ro), 1e-5) << "silu(gate) * up " << what;
      }
}

// A GEMV group that normalises its input on the fly (and writes the normalised x), and one that adds its
// output into a residual.
TEST(CudaKernels, GemvNormAndAccumFusionsMatchReference) {
  REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (int n : {1, 111, 989, 4099})
    for (int k8 : {1, 111})
      for (int batch : {1, 2, 7}) {
        const int K = k8 * 8;
        const std::string what = "seed=" + std::to_string(seed) + " N=" + std::to_string(n) +
                                 " K=" + std::to_string(K) + " B=" + std::to_string(batch);
        auto W0 = to_bf16(randn(static_cast<size_t>(n) * K, rng, 0.05f));
        auto W1 = to_bf16(randn(static_cast<size_t>(n + 3) * K, rng, 0.05f));
        auto x = randn(static_cast<size_t>(batch) * K, rng), nw = randn(K, rng);
        auto dW0 = dev_bf16(W0), dW1 = dev_bf16(W1);
        auto dx = dev(x), dnw = dev(nw);
        DeviceBuffer<float> dy0, dy1, dh;
        ASSERT_OK(dy0.upload(std::vector<float>(size_t(batch) * n, NAN)));
        ASSERT_OK(dy1.upload(std::vector<float>(size_t(batch) * (n + 3), NAN)));
        ASSERT_OK(dh.upload(std::vector<float>(size_t(batch) * K, NAN)));
        const spk::cuda::GemvSegment segs[2] = {{dW0.get(), nullptr, dy0.get(), n},
                                                {dW1.get(), nullptr, dy1.get(), n + 3}};
        spk::cuda::GemvFusion f;
        f.norm_w = dnw.get();
        f.norm_eps = 1e-5f;
        f.norm_out = dh.get();
        ASSERT_OK(spk::cuda::gemv_bf16_fused(segs, 2, dx.get(), batch, K, f, nullptr));
        std::vector<double> h(size_t(batch) * K), r0(size_t(batch) * n), r1(size_t(batch) * (n + 3));
        for (int b = 0; b < batch; ++b) {
          double ss = 0;
          for (int c = 0; c < K; ++c) ss += double(x[size_t(b) * K + c]) * x[size_t(b) * K + c];
          const double inv = 1.0 / std::sqrt(ss / K + 1e-5);
          for (int c = 0; c < K; ++c) h[size_t(b) * K + c] = x[size_t(b) * K + c] * inv * nw[c];
          for (int r = 0; r < n + 3; ++r) {
            double s0 = 0, s1 = 0;
            for (int c = 0; c < K; ++c) {
              if (r < n) s0 += double(bf(W0[size_t(r) * K + c])) * h[size_t(b) * K + c];
              s1 += double(bf(W1[size_t(r) * K + c])) * h[size_t(b) * K + c];
            }
            if (r < n) r0[size_t(b) * n + r] = s0;
            r1[size_t(b) * (n + 3) + r] = s1;
          }
        }
        EXPECT_LT(rel_err(host(dh), h), 1e-5) << "normalised x " << what;
        EXPECT_LT(rel_err(host(dy0), r0), 1e-5) << "y0 " << what;
        EXPECT_LT(rel_err(host(dy1), r1), 1e-5) << "y1 " << what;

        // accum: resid += W0 . x (y written too)
        auto resid = randn(size_t(batch) * n, rng);
        DeviceBuffer<float> dres;
        ASSERT_OK(dres.upload(resid));
        spk::cuda::GemvFusion fa;
        fa.accum = dres.get();
        ASSERT_OK(spk::cuda::gemv_bf16_fused(segs, 1, dx.get(), batch, K, fa, nullptr));
        std::vector<double> ry(size_t(batch) * n), rr(size_t(batch) * n);
        for (int b = 0; b < batch; ++b)
          for (int r = 0; r < n; ++r) {
            double s0 = 0;
            for (int c = 0; c < K; ++c) s0 += double(bf(W0[size_t(r) * K + c])) * x[size_t(b) * K + c];
            ry[size_t(b) * n + r] = s0;
            rr[size_t(b) * n + r] = resid[size_t(b) * n + r] + s0;
          }
        EXPECT_LT(rel_err(host(dy0), ry), 1e-5) << "accum y " << what;
        EXPECT_LT(rel_err(host(dres), rr), 1e-5) << "accum residual " << what;
      }
}

TEST(CudaKernels, GemmMatchesReferenceOnBf16Inputs) {
  REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  auto g = spk::cuda::Gemm::create(989, 989 * 8);
  ASSERT_TRUE(g.ok()) << g.error().what();
  std::unique_ptr<spk::cuda::Gemm> gemm(*g);
  for (int m : {9, 19, 111, 989})
    for (int n : {19, 111}) {
      const int K = 111 * 8;
      auto W = to_bf16(randn(size_t(n) * K, rng, 0.05f));
      auto x = randn(size_t(m) * K, rng);
      auto dW = dev_bf16(W);
      auto dx = dev(x);
      DeviceBuffer<float> dy;
      ASSERT_OK(dy.upload(std::vector<float>(size_t(m) * n, NAN)));
      ASSERT_OK(gemm->linear(dW.get(), nullptr, dx.get(), m, n, K, dy.get(), nullptr));
      std::vector<double> ref(size_t(m) * n);
      for (int i = 0; i < m; ++i)
        for (int r = 0; r < n; ++r) {
          double s = 0;
          for (int c = 0; c < K; ++c)
            s += double(bf(W[size_t(r) * K + c])) * bf(spk::f32_to_bf16(x[size_t(i) * K + c]));
          ref[size_t(i) * n + r] = s;
        }
      EXPECT_LT(rel_err(host(dy), ref), 1e-4) << "seed=" << seed << " M=" << m << " N=" << n;
    }
}

TEST(CudaKernels, RmsnormWithResidualMatchesReference) {
  REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (int rows : kSizes)
    for (int dim : kSizes) {
      auto x = randn(size_t(rows) * dim, rng), res = randn(size_t(rows) * dim, rng);
      auto w = randn(dim, rng);
      auto dx = dev(x), dres = dev(res), dw = dev(w);
      DeviceBuffer<float> dout;
      ASSERT_OK(dout.alloc(x.size()));
      ASSERT_OK(spk::cuda::rmsnorm(dx.get(), dres.get(), dw.get(), rows, dim, 1e-6f, dout.get(), nullptr));
      std::vector<double> ref(x.size()), ref_res(x.size());
      for (int r = 0; r < rows; ++r) {
        double ss = 0;
        for (int i = 0; i < dim; ++i) {
          ref_res[size_t(r) * dim + i] = double(x[size_t(r) * dim + i]) + res[size_t(r) * dim + i];
          ss += ref_res[size_t(r) * dim + i] * ref_res[size_t(r) * dim + i];
        }
        const double inv = 1.0 / std::sqrt(ss / dim + 1e-6);
        for (int i = 0; i < dim; ++i) ref[size_t(r) * dim + i] = ref_res[size_t(r) * dim + i] * inv * w[i];
      }
      EXPECT_LT(rel_err(host(dout), ref), 1e-5) << "seed=" << seed << " rows=" << rows << " dim=" << dim;
      EXPECT_LT(rel_err(host(dres), ref_res), 1e-6) << "seed=" << seed;
    }
}

TEST(CudaKernels, SiluMulAndEmbeddingAndArgmax) {
  REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (int t : kSizes) {
    const int inter = 111;
    auto gate = randn(size_t(t) * inter, rng, 3.0f), up = randn(size_t(t) * inter, rng);
    auto dgate = dev(gate), dup = dev(up);
    DeviceBuffer<float> dout;
    ASSERT_OK(dout.alloc(size_t(t) * inter));
    ASSERT_OK(spk::cuda::silu_mul(dgate.get(), dup.get(), int64_t(t) * inter, dout.get(), nullptr));
    std::vector<double> ref(size_t(t) * inter);
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = gate[i] / (1 + std::exp(-double(gate[i]))) * up[i];
    EXPECT_LT(rel_err(host(dout), ref), 1e-5) << "seed=" << seed;

    const int vocab = 989, hidden = 19;
    auto table = to_bf16(randn(size_t(vocab) * hidden, rng));
    std::vector<int32_t> ids(t);
    for (auto& id : ids) id = int32_t(rng() % vocab);
    auto dt = dev_bf16(table);
    auto dids = dev(ids);
    DeviceBuffer<float> demb;
    ASSERT_OK(demb.alloc(size_t(t) * hidden));
    ASSERT_OK(spk::cuda::embedding(dt.get(), true, dids.get(), t, hidden, vocab, demb.get(), nullptr));
    auto emb = host(demb);
    for (int r = 0; r < t; ++r)
      for (int i = 0; i < hidden; ++i)
        ASSERT_EQ(emb[size_t(r) * hidden + i], bf(table[size_t(ids[r]) * hidden + i]));

    auto logits = randn(size_t(t) * 5000, rng);
    for (int r = 0; r < t; ++r) {  // plant a tie: the lowest id must win
      const int a = int(rng() % 5000), b = int(rng() % 5000);
      logits[size_t(r) * 5000 + a] = logits[size_t(r) * 5000 + b] = 100.0f;
    }
    auto dl = dev(logits);
    DeviceBuffer<int32_t> dam;
    ASSERT_OK(dam.alloc(t));
    ASSERT_OK(spk::cuda::argmax(dl.get(), t, 5000, dam.get(), nullptr));
    std::vector<int32_t> am;
    ASSERT_OK(dam.download(am));
    for (int r = 0; r < t; ++r) {
      int best = 0;
      for (int v = 1; v < 5000; ++v)
        if (logits[size_t(r) * 5000 + v] > logits[size_t(r) * 5000 + best]) best = v;
      EXPECT_EQ(am[r], best) << "seed=" << seed << " row " << r;
    }
  }
}

// RoPE + paged KV write + attention over two sequences with shuffled block tables, GQA, against a
// CPU reference of the same math (rope on q/k in double, bf16-rounded K/V, causal softmax).
TEST(CudaKernels, RopeCacheAndPagedAttentionMatchReference) {
  REQUIRE_GPU();
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  // (q heads, kv heads): GQA groups of 4 (the 8B's), 7 (a padded group of 8) and 1 (MHA).
  for (auto [hq, hk] : {std::pair{8, 2}, std::pair{7, 1}, std::pair{3, 3}})
    for (int head_dim : {16, 64, 128, 256})
      for (int window : {0, 7}) {
        const int bs = 16;
        const std::vector<int> lens = {19, 111};
        const int T = lens[0] + lens[1];
        const int max_blocks = 8, num_blocks = 16;
        std::vector<int32_t> tables(2 * max_blocks);
        std::vector<int32_t> perm(num_blocks);
        for (int i = 0; i < num_blocks; ++i) perm[i] = i;
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int i = 0; i < 2 * max_blocks; ++i) tables[i] = perm[i];
        std::vector<int32_t> seq_of(T), pos(T), slots(T);
        for (int s = 0, t = 0; s < 2; ++s)
          for (int p = 0; p < lens[s]; ++p, ++t) {
            seq_of[t] = s * max_blocks;  // table offset of the token's sequence
            pos[t] = p;
            slots[t] = tables[s * max_blocks + p / bs] * bs + p % bs;
          }
        std::vector<float> inv_freq(head_dim / 2);
        for (int i = 0; i < head_dim / 2; ++i)
          inv_freq[i] = float(1.0 / std::pow(10000.0, 2.0 * i / head_dim));
        auto q = randn(size_t(T) * hq * head_dim, rng), k = randn(size_t(T) * hk * head_dim, rng),
             v = randn(size_t(T) * hk * head_dim, rng);
        auto dq = dev(q), dk = dev(k), dv = dev(v), dinv = dev(inv_freq);
        auto dpos = dev(pos), dslots = dev(slots), dseq = dev(seq_of), dtab = dev(tables);
        DeviceBuffer<bf16> kc, vc;
        ASSERT_OK(kc.alloc(size_t(num_blocks) * bs * hk * head_dim));
        ASSERT_OK(vc.alloc(size_t(num_blocks) * bs * hk * head_dim));
        if (window == 0) {  // fused
          ASSERT_OK(spk::cuda::rope_and_cache(dq.get(), dk.get(), dv.get(), dpos.get(), dinv.get(),
                                              dslots.get(), T, hq, hk, head_dim, kc.get(), vc.get(),
                                              nullptr));
        } else {  // apart
          ASSERT_OK(
              spk::cuda::rope(dq.get(), dk.get(), dpos.get(), dinv.get(), T, hq, hk, head_dim, nullptr));
          ASSERT_OK(spk::cuda::kv_write(dk.get(), dv.get(), dslots.get(), T, hk, head_dim, kc.get(), vc.get(),
                                        nullptr));
        }
        DeviceBuffer<float> dout;
        ASSERT_OK(dout.upload(std::vector<float>(q.size(), NAN)));
        const float scale = 1.0f / std::sqrt(float(head_dim));
        const std::string what = "seed=" + std::to_string(seed) + " hq=" + std::to_string(hq) +
                                 " hk=" + std::to_string(hk) + " head_dim=" + std::to_string(head_dim) +
                                 " window=" + std::to_string(window);
        // reference
        auto rope = [&](std::vector<double>& x, int p) {
          const int half = head_dim / 2;
          for (int i = 0; i < half; ++i) {
            const double a = double(float(p) * inv_freq[i]);
            const double x1 = x[i], x2 = x[i + half];
            x[i] = x1 * std::cos(a) - x2 * std::sin(a);
            x[i + half] = x2 * std::cos(a) + x1 * std::sin(a);
          }
        };
        std::vector<std::vector<double>> kr(size_t(T) * hk), vr(size_t(T) * hk);
        for (int t = 0; t < T; ++t)
          for (int h = 0; h < hk; ++h) {
            std::vector<double> kk(head_dim), vv(head_dim);
            for (int d = 0; d < head_dim; ++d) {
              kk[d] = k[(size_t(t) * hk + h) * head_dim + d];
              vv[d] = bf(spk::f32_to_bf16(v[(size_t(t) * hk + h) * head_dim + d]));
            }
            rope(kk, pos[t]);
            for (auto& e : kk) e = bf(spk::f32_to_bf16(float(e)));
            kr[size_t(t) * hk + h] = kk;
            vr[size_t(t) * hk + h] = vv;
          }
        std::vector<double> ref(q.size());
        for (int t = 0; t < T; ++t) {
          const int base = t - pos[t];  // first token of this sequence
          for (int h = 0; h < hq; ++h) {
            std::vector<double> qq(head_dim);
            for (int d = 0; d < head_dim; ++d) qq[d] = q[(size_t(t) * hq + h) * head_dim + d];
            rope(qq, pos[t]);
            const int first = window > 0 ? std::max(0, pos[t] - window + 1) : 0;
            std::vector<double> sc;
            double mx = -1e300;
            for (int j = first; j <= pos[t]; ++j) {
              double s = 0;
              for (int d = 0; d < head_dim; ++d) s += qq[d] * kr[size_t(base + j) * hk + h / (hq / hk)][d];
              s *= scale;
              sc.push_back(s);
              mx = std::max(mx, s);
            }
            double l = 0;
            for (auto& s : sc) l += (s = std::exp(s - mx));
            for (int d = 0; d < head_dim; ++d) {
              double o = 0;
              for (size_t j = 0; j < sc.size(); ++j)
                o += sc[j] * vr[size_t(base + first + int(j)) * hk + h / (hq / hk)][d];
              ref[(size_t(t) * hq + h) * head_dim + d] = o / l;
            }
          }
        }
        // Both decode kernels (per q head; one block per kv head for its GQA group where supported), whole
        // and split over 5 blocks (some empty for short contexts) merged by the combine kernel.
        // The shared kernel with split counters merges in its last split block; run twice, since the
        // counters must be left at zero for the next call.
        DeviceBuffer<int32_t> counters;
        ASSERT_OK(counters.upload(std::vector<int32_t>(size_t(T) * hk, 0)));
        for (bool share_kv : {false, true})
          for (int splits : {1, 5})
            for (int merge_in_kernel : {0, 1, 1}) {
              DeviceBuffer<float> part;
              ASSERT_OK(part.alloc(size_t(T) * hq * splits * (head_dim + 2)));
              ASSERT_OK(dout.upload(std::vector<float>(q.size(), NAN)));
              ASSERT_OK(spk::cuda::paged_attention(dq.get(), kc.get(), vc.get(), dseq.get(), dpos.get(),
                                                   dtab.get(), T, hq, hk, head_dim, bs, window, scale,
                                                   dout.get(), nullptr, splits, part.get(), share_kv,
                                                   merge_in_kernel ? counters.get() : nullptr));
              EXPECT_LT(rel_err(host(dout), ref), 2e-3)
                  << what << " share_kv=" << share_kv << " (supported "
                  << spk::cuda::paged_attention_shares_kv(hq, hk, head_dim) << ") splits=" << splits
                  << " merge_in_kernel=" << merge_in_kernel;
            }
        if (spk::cuda::paged_attention_shares_kv(hq, hk, head_dim)) {
          // Decode: the last token of each sequence is new (q, k, v unrotated, its slot not yet written);
          // paged_attention_rope rotates, caches and attends in one kernel. Its caches must end as
          // rope_and_cache left kc/vc above, q and k rotated as there, out as the reference rows.
          const std::vector<int> rows = {lens[0] - 1, T - 1};
          const size_t qrow = size_t(hq) * head_dim, krow = size_t(hk) * head_dim;
          std::vector<float> q2, k2, v2;
          std::vector<int32_t> pos2, slots2, seq2;
          for (int t : rows) {
            q2.insert(q2.end(), q.begin() + t * qrow, q.begin() + (t + 1) * qrow);
            k2.insert(k2.end(), k.begin() + t * krow, k.begin() + (t + 1) * krow);
            v2.insert(v2.end(), v.begin() + t * krow, v.begin() + (t + 1) * krow);
            pos2.push_back(pos[t]);
            slots2.push_back(slots[t]);
            seq2.push_back(seq_of[t]);
          }
          const std::vector<float> q_rot = host(dq), k_rot = host(dk);
          auto cache_host = [&](const DeviceBuffer<bf16>& c) {
            std::vector<uint16_t> h(size_t(num_blocks) * bs * hk * head_dim);
            cudaMemcpy(h.data(), c.get(), h.size() * 2, cudaMemcpyDeviceToHost);
            return h;
          };
          const std::vector<uint16_t> kc_want = cache_host(kc), vc_want = cache_host(vc);
          DeviceBuffer<int32_t> counters2;
          ASSERT_OK(counters2.upload(std::vector<int32_t>(2 * size_t(hk), 0)));
          for (int splits : {1, 5, 16}) {
            for (int t : rows)  // the new tokens' slots hold garbage (NaN) before the call
              for (auto* c : {kc.get(), vc.get()}) cudaMemset(c + size_t(slots[t]) * krow, 0xff, krow * 2);
            auto dq2 = dev(q2), dk2 = dev(k2), dv2 = dev(v2);
            auto dpos2 = dev(pos2), dslots2 = dev(slots2), dseq2 = dev(seq2);
            DeviceBuffer<float> part, dout2;
            ASSERT_OK(part.alloc(2 * qrow * splits + 2 * size_t(hq) * splits * 2));
            ASSERT_OK(dout2.upload(std::vector<float>(q2.size(), NAN)));
            const spk::cuda::DecodeRope r{dq2.get(),     dk2.get(), dv2.get(), dinv.get(),
                                          dslots2.get(), kc.get(),  vc.get()};
            ASSERT_OK(spk::cuda::paged_attention_rope(r, dseq2.get(), dpos2.get(), dtab.get(), 2, hq, hk,
                                                      head_dim, bs, window, scale, dout2.get(), nullptr,
                                                      splits, part.get(), counters2.get()));
            const std::vector<float> out2 = host(dout2), q2_after = host(dq2), k2_after = host(dk2);
            std::vector<double> ref2, qwant, kwant;
            for (int t : rows) {
              ref2.insert(ref2.end(), ref.begin() + t * qrow, ref.begin() + (t + 1) * qrow);
              qwant.insert(qwant.end(), q_rot.begin() + t * qrow, q_rot.begin() + (t + 1) * qrow);
              kwant.insert(kwant.end(), k_rot.begin() + t * krow, k_rot.begin() + (t + 1) * krow);
            }
            const std::string w2 = what + " fused decode splits=" + std::to_string(splits);
            EXPECT_LT(rel_err(out2, ref2), 2e-3) << w2;
            EXPECT_LT(rel_err(q2_after, qwant), 1e-6) << w2 << " (q rotated in place)";
            EXPECT_LT(rel_err(k2_after, kwant), 1e-6) << w2 << " (k rotated in place)";
            const std::vector<uint16_t> kc_got = cache_host(kc), vc_got = cache_host(vc);
            size_t k_bad = 0, v_bad = 0;
            for (size_t i = 0; i < kc_got.size(); ++i) {
              k_bad +=
                  !(std::abs(bf(kc_got[i]) - bf(kc_want[i])) <= 1e-2f * std::abs(bf(kc_want[i])) + 1e-6f);
              v_bad += vc_got[i] != vc_want[i];
            }
            EXPECT_EQ(k_bad, 0u) << w2 << " (k cache)";
            EXPECT_EQ(v_bad, 0u) << w2 << " (v cache)";
          }
        }
        if (spk::cuda::prefill_attention_supports(head_dim)) {  // the tiled prefill kernel, same reference
          std::vector<int32_t> tiles;
          for (int s = 0, t0 = 0; s < 2; t0 += lens[s], ++s)
            for (int r = 0; r < lens[s]; r += spk::cuda::kPrefillTileQ) {
              tiles.push_back(t0 + r);
              tiles.push_back(std::min(spk::cuda::kPrefillTileQ, lens[s] - r));
            }
          auto dtiles = dev(tiles);
          ASSERT_OK(dout.upload(std::vector<float>(q.size(), NAN)));
          ASSERT_OK(spk::cuda::prefill_attention(dq.get(), kc.get(), vc.get(),
                                                 reinterpret_cast<const int2*>(dtiles.get()),
                                                 int(tiles.size() / 2), dseq.get(), dpos.get(), dtab.get(),
                                                 hq, hk, head_dim, bs, window, scale, dout.get(), nullptr));
          // The default prefill kernel runs on tensor cores with q and the softmax weights rounded to
          // bf16 (as flash-attention does): ~3e-3 here; the SIMT kernel (SPARKCTL_PREFILL_ATTN=simt)
          // keeps them fp32 and lands under 2e-3.
          EXPECT_LT(rel_err(host(dout), ref), 8e-3) << "prefill kernel, " << what;
        }
      }
}

}  // namespace
