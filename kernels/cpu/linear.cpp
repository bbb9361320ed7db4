// y = x W^T + b, parallel over output rows. Napkin math: decode (n = 1) is a GEMV bound by reading W
// once (bf16: 2 bytes/weight; a 0.5 GB model at ~10 GB/s per core is ~25 tok/s on 2 cores); prefill
// converts each W row to fp32 once and reuses it for all n rows of x (and 4 rows at a time, so each
// loaded weight feeds 4 multiply-adds).
#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace spk::cpu {
namespace {

// 8 independent accumulators: vectorisable without -ffast-math, fp32 throughout.
inline float dot(const float* __restrict a, const float* __restrict b, int64_t n) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) s[k] += a[i + k] * b[i + k];
  float t = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  for (; i < n; ++i) t += a[i] * b[i];
  return t;
}

// Four rows of x against one weight row.
inline void dot4(const float* __restrict x0, const float* __restrict x1, const float* __restrict x2,
                 const float* __restrict x3, const float* __restrict w, int64_t n, float out[4]) {
  float a[8] = {0}, b[8] = {0}, c[8] = {0}, d[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) {
      const float wk = w[i + k];
      a[k] += x0[i + k] * wk;
      b[k] += x1[i + k] * wk;
      c[k] += x2[i + k] * wk;
      d[k] += x3[i + k] * wk;
    }
  auto fold = [](const float* s) {
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  };
  float r0 = fold(a), r1 = fold(b), r2 = fold(c), r3 = fold(d);
  for (; i < n; ++i) {
    r0 += x0[i] * w[i];
    r1 += x1[i] * w[i];
    r2 += x2[i] * w[i];
    r3 += x3[i] * w[i];
  }
  out[0] = r0, out[1] = r1, out[2] = r2, out[3] = r3;
}

}  // namespace

Status CpuBackend::linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
  if (x.dtype != DType::f32 || y.dtype != DType::f32 || !is_float(w.dtype) || w.rank() != 2 || x.rank() < 1 ||
      y.rank() < 1)
    return shape_error("linear", "x " + describe(x) + ", w " + describe(w) + ", y " + describe(y));
  const int64_t in = w.dim(1), outf = w.dim(0);
  const int64_t n = x.dim(-1) == 0 ? 0 : x.numel() / x.dim(-1);
  if (x.dim(-1) != in || y.dim(-1) != outf || y.numel() != n * outf)
    return shape_error("linear",
                       "x " + describe(x) + " . w " + describe(w) + "^T does not give y " + describe(y));
  if (bias && (bias->dtype != DType::f32 || bias->numel() != outf))
    return shape_error("linear", "bias " + describe(*bias) + " for " + std::to_string(outf) + " outputs");
  const float* xp = x.ptr<const float>();
  float* yp = y.ptr<float>();
  const float* bp = bias ? bias->ptr<const float>() : nullptr;
  const bool f32w = w.dtype == DType::f32;
  // Grain: enough rows that a chunk reads >= ~64 KB of weights.
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, in));
  pool_.parallel_for(outf, grain, [&](int64_t j0, int64_t j1) {
    thread_local std::vector<float> row;
    if (!f32w) row.resize(in);
    for (int64_t j = j0; j < j1; ++j) {
      const float* wr;
      if (f32w) {
        wr = w.ptr<const float>() + j * in;
      } else {
        load_f32(w.data, w.dtype, j * in, in, row.data());
        wr = row.data();
      }
      const float b = bp ? bp[j] : 0.0f;
      int64_t i = 0;
      for (; i + 4 <= n; i += 4) {
        float r[4];
        dot4(xp + i * in, xp + (i + 1) * in, xp + (i + 2) * in, xp + (i + 3) * in, wr, in, r);
        for (int k = 0; k < 4; ++k) yp[(i + k) * outf + j] = r[k] + b;
      }
      for (; i < n; ++i) yp[i * outf + j] = dot(xp + i * in, wr, in) + b;
    }
  });
  return ok_status();
}

}  // namespace spk::cpu
