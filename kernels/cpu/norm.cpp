// RMSNorm as HF computes it in fp32: x * rsqrt(mean(x^2) + eps) * w (mean accumulated in double).
#include <cmath>

#include "kernels/cpu/cpu_backend.h"

namespace spk::cpu {
namespace {

inline void norm_row(const float* x, const float* w, int64_t d, float eps, float* out) {
  double ss = 0;
  for (int64_t i = 0; i < d; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
  for (int64_t i = 0; i < d; ++i) out[i] = w[i] * (x[i] * inv);
}

Status check(std::string_view op, const Tensor& x, const Tensor& w, const Tensor& out) {
  const int64_t d = w.numel();
  if (x.dtype != DType::f32 || out.dtype != DType::f32 || w.dtype != DType::f32 || d == 0 || x.dim(-1) != d ||
      out.numel() != x.numel())
    return shape_error(op, "x " + describe(x) + ", w " + describe(w) + " (f32), out " + describe(out));
  return ok_status();
}

}  // namespace

Status CpuBackend::rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  SPK_TRY(check("rmsnorm", x, w, out));
  const int64_t d = w.numel(), rows = x.numel() / d;
  const float* xp = x.ptr<const float>();
  const float* wp = w.ptr<const float>();
  float* op = out.ptr<float>();
  pool_.parallel_for(rows, std::max<int64_t>(1, 16384 / d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) norm_row(xp + r * d, wp, d, eps, op + r * d);
  });
  return ok_status();
}

Status CpuBackend::add_rmsnorm(Tensor& residual, const Tensor& delta, const Tensor& w, float eps,
                               Tensor& out) {
  SPK_TRY(check("add_rmsnorm", residual, w, out));
  if (delta.dtype != DType::f32 || delta.numel() != residual.numel())
    return shape_error("add_rmsnorm", "delta " + describe(delta) + " for residual " + describe(residual));
  const int64_t d = w.numel(), rows = residual.numel() / d;
  float* rp = residual.ptr<float>();
  const float* dp = delta.ptr<const float>();
  const float* wp = w.ptr<const float>();
  float* op = out.ptr<float>();
  pool_.parallel_for(rows, std::max<int64_t>(1, 16384 / d), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float* x = rp + r * d;
      for (int64_t i = 0; i < d; ++i) x[i] += dp[r * d + i];
      norm_row(x, wp, d, eps, op + r * d);
    }
  });
  return ok_status();
}

}  // namespace spk::cpu
