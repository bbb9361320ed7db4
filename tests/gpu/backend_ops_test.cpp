// Backend ops (the llama.cpp test-backend-ops idea): every op of the seam on the CUDA backend against the
// CPU reference backend, per {op, weight format / KV format / attention kind, shape} at awkward sizes. Each
// case runs the op on both backends from the same inputs and compares by normalised error
// (||cuda - cpu|| / ||cpu||); a failure prints the case, so a new kernel or format shows where it breaks.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/device_buffer.h"

namespace {

using spk::Backend;
using spk::DType;
using spk::Result;
using spk::Status;
using spk::Tensor;

// The inputs of one case, made once and imported into each backend.
struct Inputs {
  explicit Inputs(uint64_t seed) : rng(seed) {}
  std::mt19937_64 rng;
  std::vector<float> floats(size_t n, float sd = 0.5f) {
    std::normal_distribution<float> nd(0.0f, sd);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
  }
  std::vector<uint16_t> bf16(size_t n, float sd = 0.1f) {
    std::vector<uint16_t> o;
    for (float x : floats(n, sd)) o.push_back(spk::f32_to_bf16(x));
    return o;
  }
};

// What a case does on one backend: make its tensors from `in` (same seed on both), run the op, download the
// result into `out`.
using Run = std::function<Status(Backend& be, Inputs& in, std::vector<float>& out)>;

struct Case {
  std::string name;  // "linear dense-bf16 m=17 k=136 n=40 bias"
  uint64_t seed;
  double tol;  // normalised error allowed (bf16 staging, bf16 KV)
  Run run;
};

// Host bytes travel with the tensor (keepalive): the CPU backend references them in place.
Result<Tensor> f32(Backend& be, const std::vector<float>& v, std::vector<int64_t> shape) {
  auto keep = std::make_shared<std::vector<float>>(v);
  return be.import_weight(keep->data(), DType::f32, std::move(shape), keep, DType::f32);
}
Result<Tensor> bf16w(Backend& be, const std::vector<uint16_t>& v, std::vector<int64_t> shape) {
  auto keep = std::make_shared<std::vector<uint16_t>>(v);
  return be.import_weight(keep->data(), DType::bf16, std::move(shape), keep, be.weight_dtype(DType::bf16));
}
template <class T>
Result<Tensor> raw(Backend& be, const std::vector<T>& v, DType dt, std::vector<int64_t> shape) {
  auto keep = std::make_shared<std::vector<T>>(v);
  return be.import_weight(keep->data(), dt, std::move(shape), keep, dt);
}
Status down(Backend& be, const Tensor& t, std::vector<float>& out) {
  out.assign(size_t(t.numel()), NAN);
  return be.download(t, out.data(), out.size() * 4);
}

#define TRY_T(var, expr)                     \
  auto var##_r = (expr);                     \
  if (!var##_r.ok()) return var##_r.error(); \
  Tensor var = *var##_r

// One step of `seqs` sequences: (new tokens, context after the step), blocks handed out in a scrambled
// order so block tables are not the identity.
spk::StepMeta make_step(const std::vector<std::pair<int, int>>& seqs, int block_size, int* num_blocks) {
  spk::StepMeta m;
  m.block_size = block_size;
  int next = 0, row = 0;
  std::vector<int32_t> all;
  for (auto [q_len, ctx] : seqs) {
    const int nb = (ctx + block_size - 1) / block_size;
    m.seqs.push_back({row, q_len, ctx, int32_t(m.block_tables.size())});
    for (int b = 0; b < nb; ++b) m.block_tables.push_back(next++);
    for (int p = ctx - q_len; p < ctx; ++p, ++row) {
      m.positions.push_back(p);
      m.slots.push_back(m.block_tables[m.seqs.back().bt_offset + p / block_size] * block_size +
                        p % block_size);
    }
  }
  // Scramble: block b -> (b * 7 + 3) mod next, a permutation when next is not a multiple of 7.
  int total = next + (next % 7 == 0 ? 1 : 0);
  for (auto& b : m.block_tables) b = (b * 7 + 3) % total;
  int p = 0;
  for (const auto& s : m.seqs)
    for (int i = 0; i < s.q_len; ++i, ++p)
      m.slots[p] = m.block_tables[s.bt_offset + m.positions[p] / block_size] * block_size +
                   m.positions[p] % block_size;
  *num_blocks = total;
  return m;
}

std::vector<Case> linear_cases() {
  std::vector<Case> cs;
  uint64_t seed = 100;
  for (int m : {1, 2, 3, 8, 17, 70})
    for (auto [k, n] : std::vector<std::pair<int, int>>{{64, 24}, {136, 40}, {520, 200}, {1000, 8}})
      for (bool bias : {false, true}) {
        Case c{"linear dense-bf16 m=" + std::to_string(m) + " k=" + std::to_string(k) +
                   " n=" + std::to_string(n) + (bias ? " bias" : ""),
               ++seed, 2e-2, nullptr};
        c.run = [=](Backend& be, Inputs& in, std::vector<float>& out) -> Status {
          TRY_T(x, f32(be, in.floats(size_t(m) * k), {m, k}));
          TRY_T(w, bf16w(be, in.bf16(size_t(n) * k), {n, k}));
          TRY_T(b, f32(be, in.floats(size_t(n)), {n}));
          TRY_T(y, be.alloc(DType::f32, {m, n}));
          SPK_TRY(be.linear(x, w, bias ? &b : nullptr, y));
          return down(be, y, out);
        };
        cs.push_back(std::move(c));
      }
  return cs;
}

// A GPTQ int4 weight (checkpoint layout, kernels/formats/linear_weight.h): random nibbles, zeros and f16
// scales, `group` inputs per group (<= 0: all of K), act-order g_idx when asked.
Result<spk::LinearWeight> gptq_weight(Backend& be, Inputs& in, int K, int N, int group_size, bool act_order) {
  const int group = group_size > 0 ? group_size : K, G = (K + group - 1) / group;
  std::vector<int32_t> qw(size_t(K / 8) * N), qz(size_t(G) * (N / 8)), gi;
  for (auto& v : qw) v = int32_t(uint32_t(in.rng()));
  for (auto& v : qz) v = int32_t(uint32_t(in.rng()));
  std::vector<uint16_t> sc(size_t(G) * N);
  const std::vector<float> sf = in.floats(sc.size(), 0.01f);
  for (size_t i = 0; i < sc.size(); ++i) sc[i] = spk::f32_to_f16(sf[i]);
  if (act_order) {  // a permutation of the inputs, `group` of them per group
    gi.resize(K);
    for (int k = 0; k < K; ++k) gi[(k * 37 + 11) % K] = k / group;
  }
  spk::LinearWeight w;
  w.format = spk::WeightFormat::gptq_int4;
  w.out = N, w.in = K, w.group_size = group_size;
  SPK_TRY(spk::require_support(be, w.format, "the test's gptq weight"));
  TRY_T(qwt, raw(be, qw, DType::i32, {K / 8, N}));
  TRY_T(qzt, raw(be, qz, DType::i32, {G, N / 8}));
  TRY_T(sct, raw(be, sc, DType::f16, {G, N}));
  w.values = qwt, w.zeros = qzt, w.scales = sct;
  if (act_order) {
    TRY_T(git, raw(be, gi, DType::i32, {K}));
    w.g_idx = git;
  }
  return w;
}

// GPTQ int4 with and without act-order g_idx (the generic kernel, w4a16_gidx.cu; the fast one takes the
// rest).
std::vector<Case> gptq_cases() {
  std::vector<Case> cs;
  uint64_t seed = 500;
  struct Shape {
    int k, n, group;
  };
  // m covers each row template of the fast kernel (1, 2, <= 4, <= 8) and row blocks past 8; the shapes cover
  // a last group shorter than the rest (200 / 64), column blocks cut by N (1032), K slices that cut a group
  // (4096 / 128 on few columns) and one group of all K (-1).
  for (int m : {1, 2, 3, 5, 8, 17})
    for (const Shape sh : {Shape{128, 64, 32}, Shape{256, 40, 128}, Shape{200, 48, 64}, Shape{1024, 96, -1},
                           Shape{768, 1032, 32}, Shape{4096, 256, 128}})
      for (bool act_order : {false, true}) {
        Case c{"linear gptq-int4 m=" + std::to_string(m) + " k=" + std::to_string(sh.k) +
                   " n=" + std::to_string(sh.n) + " group=" + std::to_string(sh.group) +
                   (act_order ? " act-order" : "") + (m == 3 ? " bias" : ""),
               ++seed, 1e-4, nullptr};
        c.run = [=](Backend& be, Inputs& in, std::vector<float>& out) -> Status {
          auto w = gptq_weight(be, in, sh.k, sh.n, sh.group, act_order);
          if (!w.ok()) return w.error();
          TRY_T(x, f32(be, in.floats(size_t(m) * sh.k), {m, sh.k}));
          TRY_T(b, f32(be, in.floats(size_t(sh.n)), {sh.n}));
          TRY_T(y, be.alloc(DType::f32, {m, sh.n}));
          SPK_TRY(be.linear(x, *w, m == 3 ? &b : nullptr, y));
          return down(be, y, out);
        };
        cs.push_back(std::move(c));
      }
  return cs;
}

// GPTQ int4 linears on one x one after the other, as q/k/v and gate/up are (the CUDA backend runs them as
// one launch, fusion/w4a16_group.cpp): each output against the CPU twin, outputs concatenated. Covers every
// row template, segments of unequal width with and without bias, more linears than one launch takes, and an
// act-order one in the middle (it runs alone and ends the group).
std::vector<Case> gptq_group_cases() {
  std::vector<Case> cs;
  uint64_t seed = 700;
  struct Seg {
    int n;
    bool bias, act_order;
  };
  const std::vector<std::pair<std::string, std::vector<Seg>>> groups = {
      {"q/k/v", {{256, false, false}, {64, true, false}, {64, false, false}}},
      {"gate/up", {{1032, false, false}, {1032, false, false}}},
      {"six",
       {{40, true, false},
        {48, false, false},
        {520, true, false},
        {64, false, false},
        {96, false, false},
        {8, true, false}}},
      {"act-order between", {{64, false, false}, {64, false, true}, {64, true, false}, {64, false, false}}}};
  for (int m : {1, 2, 3, 8, 11})
    for (const auto& [label, segs] : groups)
      for (int group : {32, 128}) {
        const int K = 1024;
        Case c{"linear gptq-int4 " + label + " m=" + std::to_string(m) +
                   " k=1024 group=" + std::to_string(group),
               ++seed, 1e-4, nullptr};
        c.run = [=, segs = segs](Backend& be, Inputs& in, std::vector<float>& out) -> Status {
          TRY_T(x, f32(be, in.floats(size_t(m) * K), {m, K}));
          std::vector<spk::LinearWeight> ws;
          std::vector<Tensor> bs, ys;
          for (const Seg& sg : segs) {  // every tensor first: the linears must follow one another
            auto w = gptq_weight(be, in, K, sg.n, group, sg.act_order);
            if (!w.ok()) return w.error();
            ws.push_back(*w);
            TRY_T(b, f32(be, in.floats(size_t(sg.n)), {sg.n}));
            TRY_T(y, be.alloc(DType::f32, {m, sg.n}));
            bs.push_back(b), ys.push_back(y);
          }
          for (size_t i = 0; i < segs.size(); ++i)
            SPK_TRY(be.linear(x, ws[i], segs[i].bias ? &bs[i] : nullptr, ys[i]));
          out.clear();
          for (const Tensor& y : ys) {
            std::vector<float> part;
            SPK_TRY(down(be, y, part));
            out.insert(out.end(), part.begin(), part.end());
          }
          return spk::ok_status();
        };
        cs.push_back(std::move(c));
      }
  return cs;
}

std::vector<Case> elementwise_cases() {
  std::vector<Case> cs;
  uint64_t seed = 200;
  for (int n : {1, 3, 17})
    for (int d : {64, 136, 1000}) {
      const std::string shape = " n=" + std::to_string(n) + " d=" + std::to_string(d);
      cs.push_back(
          {"rmsnorm" + shape, ++seed, 1e-4, [=](Backend& be, Inputs& in, std::vector<float>& out) -> Status {
             TRY_T(x, f32(be, in.floats(size_t(n) * d), {n, d}));
             TRY_T(w, f32(be, in.floats(size_t(d)), {d}));
             TRY_T(y, be.alloc(DType::f32, {n, d}));
             SPK_TRY(be.rmsnorm(x, w, 1e-6f, y));
             return down(be, y, out);
           }});
      cs.push_back({"add_rmsnorm" + shape, ++seed, 1e-4,
                    [=](Backend& be, Inputs& in, std::vector<float>& out) -> Status {
                      TRY_T(r, f32(be, in.floats(size_t(n) * d), {n, d}));
                      TRY_T(dl, f32(be, in.floats(size_t(n) * d), {n, d}));
                      TRY_T(w, f32(be, in.floats(size_t(d)), {d}));
                      TRY_T(y, be.alloc(DType::f32, {n, d}));
                      SPK_TRY(be.add_rmsnorm(r, dl, w, 1e-6f, y));
                      std::vector<float> a, b;
                      SPK_TRY(down(be, y, a));
                      SPK_TRY(down(be, r, b));
                      out = a;
                      out.insert(out.end(), b.begin(), b.end());
                      return spk::ok_status();
                    }});
      cs.push_back(
          {"silu_mul" + shape, ++seed, 1e-5, [=](Backend& be, Inputs& in, std::vector<float>& out) -> Status {
             TRY_T(g, f32(be, in.floats(size_t(n) * d), {n, d}));
             TRY_T(u, f32(be, in.floats(size_t(n) * d), {n, d}));
             TRY_T(y, be.alloc(DType::f32, {n, d}));
             SPK_TRY(be.silu_mul(g, u, y));
             return down(be, y, out);
           }});
      cs.push_back({"embedding bf16" + shape, ++seed, 0.0,
                    [=](Backend& be, Inputs& in, std::vector<float>& out) -> Status {
                      const int vocab = 333;
                      TRY_T(t, bf16w(be, in.bf16(size_t(vocab) * d), {vocab, d}));
                      std::vector<int32_t> ids(n);
                      for (int i = 0; i < n; ++i) ids[i] = int32_t((i * 97 + 5) % vocab);
                      TRY_T(idt, be.alloc(DType::i32, {n}));
                      SPK_TRY(be.upload(idt, ids.data(), ids.size() * 4));
                      TRY_T(y, be.alloc(DType::f32, {n, d}));
                      SPK_TRY(be.embedding(t, idt, y));
                      return down(be, y, out);
                    }});
      cs.push_back({"gather_rows" + shape, ++seed, 0.0,
                    [=](Backend& be, Inputs& in, std::vector<float>& out) -> Status {
                      TRY_T(x, f32(be, in.floats(size_t(n) * d), {n, d}));
                      std::vector<int32_t> rows = {int32_t(n - 1), 0};
                      TRY_T(rt, be.alloc(DType::i32, {2}));
                      SPK_TRY(be.upload(rt, rows.data(), 8));
                      TRY_T(y, be.alloc(DType::f32, {2, d}));
                      SPK_TRY(be.gather_rows(x, rt, y));
                      return down(be, y, out);
                    }});
    }
  return cs;
}

// rope + kv_write + attention over one step; KV in each backend's own format (the CUDA bf16 cache is the
// intended difference), causal and sliding.
std::vector<Case> attention_cases() {
  std::vector<Case> cs;
  uint64_t seed = 300;
  struct Shape {
    int hq, hk, hd;
  };
  const std::vector<std::vector<std::pair<int, int>>> steps = {
      {{1, 1}},                      // first token
      {{1, 37}, {1, 5}, {1, 129}},   // decode, ragged contexts
      {{23, 23}, {1, 70}, {9, 40}},  // mixed prefill and decode
      {{70, 70}},                    // a prefill longer than the tile
  };
  for (const Shape sh : {Shape{4, 2, 64}, Shape{8, 1, 128}, Shape{6, 6, 64}, Shape{12, 4, 128}})
    for (size_t si = 0; si < steps.size(); ++si)
      for (spk::AttnKind kind : {spk::AttnKind::causal, spk::AttnKind::sliding}) {  // mla: its own op
        const int window = kind == spk::AttnKind::sliding ? 17 : 0;
        Case c{"attention " + std::string(spk::attn_kind_name(kind)) + " hq=" + std::to_string(sh.hq) +
                   " hk=" + std::to_string(sh.hk) + " hd=" + std::to_string(sh.hd) +
                   " step=" + std::to_string(si),
               ++seed, 2e-2, nullptr};
        const auto seqs = steps[si];
        c.run = [=](Backend& be, Inputs& in, std::vector<float>& out) -> Status {
          int nb = 0;
          const int bs = 16;
          spk::StepMeta meta = make_step(seqs, bs, &nb);
          const int n = int(meta.positions.size());
          const DType kvd = spk::kv_element_dtype(be.kv_format());
          TRY_T(kc, be.alloc(kvd, {nb, bs, sh.hk, sh.hd}));
          TRY_T(vc, be.alloc(kvd, {nb, bs, sh.hk, sh.hd}));
          spk::KvCache cache{kc, vc, {}, {}};
          std::vector<float> inv = spk::rope_inv_freq(sh.hd, 10000.0, nullptr);
          TRY_T(invf, f32(be, inv, {int64_t(inv.size())}));
          // Earlier context: a first step writes every position before this step's tokens, through the
          // same block tables.
          spk::StepMeta m0;
          m0.block_size = bs;
          m0.block_tables = meta.block_tables;
          for (const auto& ms : meta.seqs) {
            const int prior = ms.ctx_len - ms.q_len;
            if (prior == 0) continue;
            m0.seqs.push_back({int32_t(m0.positions.size()), prior, prior, ms.bt_offset});
            for (int p = 0; p < prior; ++p) {
              m0.positions.push_back(p);
              m0.slots.push_back(meta.block_tables[ms.bt_offset + p / bs] * bs + p % bs);
            }
          }
          if (!m0.seqs.empty()) {
            const int n0 = int(m0.positions.size());
            SPK_TRY(be.begin_step(m0));
            TRY_T(k0, f32(be, in.floats(size_t(n0) * sh.hk * sh.hd), {n0, sh.hk, sh.hd}));
            TRY_T(v0, f32(be, in.floats(size_t(n0) * sh.hk * sh.hd), {n0, sh.hk, sh.hd}));
            SPK_TRY(be.kv_write(k0, v0, cache));
          }
          SPK_TRY(be.begin_step(meta));
          TRY_T(q, f32(be, in.floats(size_t(n) * sh.hq * sh.hd), {n, sh.hq, sh.hd}));
          TRY_T(k, f32(be, in.floats(size_t(n) * sh.hk * sh.hd), {n, sh.hk, sh.hd}));
          TRY_T(v, f32(be, in.floats(size_t(n) * sh.hk * sh.hd), {n, sh.hk, sh.hd}));
          TRY_T(o, be.alloc(DType::f32, {n, sh.hq, sh.hd}));
          SPK_TRY(be.rope(q, k, invf));
          SPK_TRY(be.kv_write(k, v, cache));
          SPK_TRY(be.attention(q, cache, spk::AttnSpec::windowed(1.0f / std::sqrt(float(sh.hd)), window), o));
          return down(be, o, out);
        };
        cs.push_back(std::move(c));
      }
  return cs;
}

std::vector<Case> moe_cases() {
  std::vector<Case> cs;
  uint64_t seed = 400;
  for (int n : {1, 5, 70})
    for (int inter : {48, 136}) {
      Case c{
          "moe_ffn dense-bf16 n=" + std::to_string(n) + " inter=" + std::to_string(inter) + " experts=6 k=2",
          ++seed, 2e-2, nullptr};
      c.run = [=](Backend& be, Inputs& in, std::vector<float>& out) -> Status {
        const int d = 64, E = 6, K = 2;
        std::vector<spk::ExpertWeights> ex(E);
        for (auto& e : ex) {
          TRY_T(g, bf16w(be, in.bf16(size_t(inter) * d), {inter, d}));
          TRY_T(u, bf16w(be, in.bf16(size_t(inter) * d), {inter, d}));
          TRY_T(dn, bf16w(be, in.bf16(size_t(d) * inter), {d, inter}));
          e = {g, u, dn};
        }
        std::vector<int32_t> ids(size_t(n) * K);
        std::vector<float> w(size_t(n) * K);
        for (int t = 0; t < n; ++t)
          for (int j = 0; j < K; ++j)
            ids[t * K + j] = int32_t((t * 3 + j * 2) % E), w[t * K + j] = 0.25f + 0.5f * j;
        if (n > 1) ids[K] = -1;  // a slot with no expert
        TRY_T(x, f32(be, in.floats(size_t(n) * d), {n, d}));
        TRY_T(idt, be.alloc(DType::i32, {n, K}));
        TRY_T(wt, be.alloc(DType::f32, {n, K}));
        SPK_TRY(be.upload(idt, ids.data(), ids.size() * 4));
        SPK_TRY(be.upload(wt, w.data(), w.size() * 4));
        TRY_T(y, be.alloc(DType::f32, {n, d}));
        SPK_TRY(be.prepare_experts(ex));
        SPK_TRY(be.moe_ffn(x, ex, idt, wt, y));
        return down(be, y, out);
      };
      cs.push_back(std::move(c));
    }
  return cs;
}

void run_all(const std::vector<Case>& cases) {
  std::string why;
  if (!spk::cuda::cuda_device_available(&why)) GTEST_SKIP() << "gpu test skipped: " << why;
  auto cpu = spk::make_backend({"cpu", 2});
  auto gpu = spk::make_backend({"cuda", 0});
  ASSERT_TRUE(cpu.ok()) << cpu.error().what();
  ASSERT_TRUE(gpu.ok()) << gpu.error().what();
  int failed = 0;
  for (const Case& c : cases) {
    std::vector<float> a, b;
    Inputs ia(c.seed), ib(c.seed);
    Status sa = c.run(**cpu, ia, a);
    Status sb = c.run(**gpu, ib, b);
    if (sb.ok()) sb = (*gpu)->synchronize();
    if (!sa.ok() || !sb.ok()) {
      ++failed;
      ADD_FAILURE() << c.name << ": cpu " << (sa.ok() ? "ok" : sa.error().what()) << ", cuda "
                    << (sb.ok() ? "ok" : sb.error().what());
      continue;
    }
    double num = 0, den = 0;
    size_t nan = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (std::isnan(b[i])) ++nan;
      num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
      den += double(a[i]) * a[i];
    }
    const double err = std::sqrt(num / std::max(den, 1e-30));
    if (a.size() != b.size() || nan > 0 || !(err <= std::max(c.tol, 1e-7))) {
      ++failed;
      ADD_FAILURE() << c.name << ": normalised error " << err << " (allowed " << c.tol << "), " << nan
                    << " NaN of " << b.size();
    }
  }
  std::printf("backend ops: %zu cases, %d failed\n", cases.size(), failed);
}

TEST(BackendOps, Linear) { run_all(linear_cases()); }
TEST(BackendOps, Elementwise) { run_all(elementwise_cases()); }
TEST(BackendOps, Attention) { run_all(attention_cases()); }
TEST(BackendOps, MoeFfn) { run_all(moe_cases()); }
TEST(BackendOps, LinearGptqInt4) { run_all(gptq_cases()); }
TEST(BackendOps, LinearGptqInt4Grouped) { run_all(gptq_group_cases()); }

// Every variant the CUDA backend says it runs is one the CPU reference runs too (the twin exists).
TEST(BackendOps, CudaVariantsHaveCpuTwins) {
  std::string why;
  if (!spk::cuda::cuda_device_available(&why)) GTEST_SKIP() << "gpu test skipped: " << why;
  auto cpu = spk::make_backend({"cpu", 1});
  auto gpu = spk::make_backend({"cuda", 0});
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  for (auto f : spk::kAllWeightFormats)
    if ((*gpu)->supports(f)) EXPECT_TRUE((*cpu)->supports(f)) << spk::weight_format_name(f);
  for (auto k : spk::kAllAttnKinds)
    if ((*gpu)->supports(k)) EXPECT_TRUE((*cpu)->supports(k)) << spk::attn_kind_name(k);
}

}  // namespace
