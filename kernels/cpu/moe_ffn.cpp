// Mixture-of-experts SiLU-GLU FFN on the CPU: tokens are bucketed by expert, each expert with tokens runs
// gate/up -> silu*up -> down over its gathered rows (the parallel linear op, so a weight row read once
// feeds every token routed to the expert), then its rows are added, weighted, into the output.
// Napkin math: decode reads only the selected experts' weights: Qwen3-30B-A3B bf16 at batch 1 is
// 48 layers x 8 experts x 3 x 768 x 2048 x 2 B = 3.6 GB of expert weights a token, against 58 GB for
// all 128 experts. Determinism: a token's experts are added in ascending expert index, and the linear
// op gives bit-identical rows whatever the batch, so a row's output does not depend on its neighbours.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu_backend.h"

namespace spk::cpu {
namespace {

// Shapes only: linear() checks each weight's format and layout.
Status check_expert(const ExpertWeights& e, size_t index, int64_t d) {
  const auto& g = e.gate;
  const bool ok = !g.empty() && !e.up.empty() && !e.down.empty() && g.in == d && e.up.in == d &&
                  e.up.out == g.out && e.down.out == d && e.down.in == g.out && g.out > 0;
  if (ok) return ok_status();
  return shape_error("moe_ffn", "expert " + std::to_string(index) + ": gate " + describe(g) + ", up " +
                                    describe(e.up) + ", down " + describe(e.down) + " for width " +
                                    std::to_string(d));
}

// A [rows, cols] f32 view of host memory owned by the caller.
Tensor view(float* p, int64_t rows, int64_t cols) {
  Tensor t;
  t.data = p;
  t.dtype = DType::f32;
  t.shape = {rows, cols};
  return t;
}

}  // namespace

Status CpuBackend::moe_ffn(const Tensor& x, const std::vector<ExpertWeights>& experts, const Tensor& ids,
                           const Tensor& w, Tensor& out) {
  if (x.dtype != DType::f32 || x.rank() != 2 || out.dtype != DType::f32 || out.shape != x.shape ||
      ids.dtype != DType::i32 || ids.rank() != 2 || ids.dim(0) != x.dim(0) || w.dtype != DType::f32 ||
      w.shape != ids.shape)
    return shape_error("moe_ffn", "x " + describe(x) + ", ids " + describe(ids) + ", w " + describe(w) +
                                      ", out " + describe(out));
  const int64_t n = x.dim(0), d = x.dim(1), k = ids.dim(1), ne = static_cast<int64_t>(experts.size());
  for (size_t e = 0; e < experts.size(); ++e) SPK_TRY(check_expert(experts[e], e, d));
  const int32_t* ip = ids.ptr<const int32_t>();
  const float* wp = w.ptr<const float>();
  // Bucket (token, slot) pairs by expert, tokens ascending within a bucket.
  std::vector<std::vector<int64_t>> bucket(experts.size());
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = ip[t * k + j];
      if (e == -1) continue;
      if (e < 0 || e >= ne)
        return shape_error("moe_ffn", "token " + std::to_string(t) + " slot " + std::to_string(j) +
                                          " names expert " + std::to_string(e) + " of " + std::to_string(ne));
      bucket[e].push_back(t * k + j);
    }
  float* op = out.ptr<float>();
  std::fill(op, op + n * d, 0.0f);
  const float* xp = x.ptr<const float>();
  for (int64_t e = 0; e < ne; ++e) {
    const auto& b = bucket[e];
    if (b.empty()) continue;
    const int64_t m = static_cast<int64_t>(b.size()), inter = experts[e].inter();
    const size_t need = static_cast<size_t>(m * (2 * d + 3 * inter));
    if (sealed_ && need > moe_scratch_.capacity())
      return make_error("cpu moe_ffn: expert " + std::to_string(e) + " needs " + std::to_string(need * 4) +
                            " bytes of scratch, " + std::to_string(moe_scratch_.capacity() * 4) +
                            " were reserved before the KV pool",
                        "raise --max-num-batched-tokens (it sizes the reservation), or report the model");
    moe_scratch_.resize(need);
    float* xs = moe_scratch_.data();
    float* gs = xs + m * d;
    float* us = gs + m * inter;
    float* as = us + m * inter;
    float* ys = as + m * inter;
    for (int64_t r = 0; r < m; ++r) std::memcpy(xs + r * d, xp + (b[r] / k) * d, d * sizeof(float));
    Tensor X = view(xs, m, d), G = view(gs, m, inter), U = view(us, m, inter), A = view(as, m, inter),
           Y = view(ys, m, d);
    SPK_TRY(linear(X, experts[e].gate, nullptr, G));
    SPK_TRY(linear(X, experts[e].up, nullptr, U));
    SPK_TRY(silu_mul(G, U, A));
    SPK_TRY(linear(A, experts[e].down, nullptr, Y));
    for (int64_t r = 0; r < m; ++r) {
      const float wt = wp[b[r]];
      float* o = op + (b[r] / k) * d;
      const float* y = ys + r * d;
      for (int64_t i = 0; i < d; ++i) o[i] += wt * y[i];
    }
  }
  return ok_status();
}

}  // namespace spk::cpu
