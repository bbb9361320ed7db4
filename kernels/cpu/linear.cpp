// y = x W^T + b, parallel over output rows. Napkin math: decode (n = 1) is a GEMV bound by reading W
// once (bf16: 2 bytes/weight; a 0.5 GB model at ~10 GB/s per core is ~25 tok/s on 2 cores); prefill
// reuses each weight row for all n rows of x, 4 rows at a time, so each loaded weight feeds 4 products.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/formats/gptq_int4.h"

// The 8-lane helpers are internal inline functions: the AVX-argument ABI note does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace spk::cpu {
namespace {

// 8-lane vectors (GCC/Clang vector extensions: SSE2 pairs on baseline x86-64, one AVX register when
// built for it). Lane k accumulates elements i = k mod 8, then lanes fold in a fixed order, so every
// path below gives bit-identical results for the same row (batching never changes numbers).
typedef float v8f __attribute__((vector_size(32)));
typedef uint16_t v8u16 __attribute__((vector_size(16)));
typedef uint32_t v8u32 __attribute__((vector_size(32)));

inline v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline v8f load8(const uint16_t* p) {  // bf16 -> f32 is a 16-bit shift
  v8u16 h;
  std::memcpy(&h, p, sizeof h);
  const v8u32 u = __builtin_convertvector(h, v8u32) << 16;
  v8f f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline float scalar(float x) { return x; }
inline float scalar(uint16_t h) { return bf16_to_f32(h); }
inline float fold(v8f s) { return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])); }

template <class W>
inline float dot(const float* __restrict x, const W* __restrict w, int64_t n) {
  v8f s = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) s += load8(x + i) * load8(w + i);
  float t = fold(s);
  for (; i < n; ++i) t += x[i] * scalar(w[i]);
  return t;
}

// Four rows of x against one weight row: each loaded weight feeds 4 products.
template <class W>
inline void dot4(const float* __restrict x, int64_t stride, const W* __restrict w, int64_t n, float out[4]) {
  v8f a = {0, 0, 0, 0, 0, 0, 0, 0}, b = a, c = a, d = a;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const v8f wk = load8(w + i);
    a += load8(x + i) * wk;
    b += load8(x + stride + i) * wk;
    c += load8(x + 2 * stride + i) * wk;
    d += load8(x + 3 * stride + i) * wk;
  }
  float r[4] = {fold(a), fold(b), fold(c), fold(d)};
  for (; i < n; ++i) {
    const float wi = scalar(w[i]);
    for (int k = 0; k < 4; ++k) r[k] += x[k * stride + i] * wi;
  }
  for (int k = 0; k < 4; ++k) out[k] = r[k];
}

// y[:, j] for rows j of one weight row `wr` (already the type the dot reads).
template <class W>
inline void rows_times(const float* xp, int64_t n, int64_t in, const W* wr, float b, float* yp, int64_t outf,
                       int64_t j) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    float r[4];
    dot4(xp + i * in, in, wr, in, r);
    for (int k = 0; k < 4; ++k) yp[(i + k) * outf + j] = r[k] + b;
  }
  for (; i < n; ++i) yp[i * outf + j] = dot(xp + i * in, wr, in) + b;
}

// The dense row of the chooser below: w [out, in] f32 / bf16 / f16.
Status linear_dense(ThreadPool& pool, const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y) {
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
  // Grain: enough rows that a chunk reads >= ~64 KB of weights.
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, in));
  pool.parallel_for(outf, grain, [&](int64_t j0, int64_t j1) {
    thread_local std::vector<float> row;
    for (int64_t j = j0; j < j1; ++j) {
      const float b = bp ? bp[j] : 0.0f;
      if (w.dtype == DType::f32) {
        rows_times(xp, n, in, w.ptr<const float>() + j * in, b, yp, outf, j);
      } else if (w.dtype == DType::bf16) {  // converted in the inner loop: no copy of the row
        rows_times(xp, n, in, w.ptr<const uint16_t>() + j * in, b, yp, outf, j);
      } else {  // f16: convert the row once, then the f32 path
        row.resize(in);
        load_f32(w.data, w.dtype, j * in, in, row.data());
        rows_times(xp, n, in, row.data(), b, yp, outf, j);
      }
    }
  });
  return ok_status();
}

}  // namespace

// The weight-format chooser: one row per format, each in its own file (kernels/formats/).
Status CpuBackend::linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& y) {
  switch (w.format) {
    case WeightFormat::dense:
      return linear_dense(pool_, x, w.values, bias, y);
    case WeightFormat::gptq_int4:
      return gptq_int4_linear(x, w, bias, y, pool_);
    default:
      break;
  }
  return make_error("cpu linear: weight " + describe(w) + " is in a format this build does not run",
                    "this is a caller bug: load checks Backend::supports() first");
}

}  // namespace spk::cpu
