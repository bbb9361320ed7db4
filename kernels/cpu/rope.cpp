// Neox-style RoPE (HF rotate_half): for i < hd/2, (x_i, x_{i+hd/2}) rotates by angle pos * inv_freq[i].
// cos/sin are computed per (token, i) in double from the fp32 product HF forms.
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace spk::cpu {

Status CpuBackend::rope(Tensor& q, Tensor& k, const Tensor& inv_freq) {
  if (!have_step_) return shape_error("rope", "called before begin_step");
  const int64_t n = static_cast<int64_t>(step_.positions.size());
  if (q.rank() != 3 || k.rank() != 3 || q.dtype != DType::f32 || k.dtype != DType::f32 ||
      inv_freq.dtype != DType::f32 || q.dim(0) != n || k.dim(0) != n || q.dim(2) != k.dim(2) ||
      q.dim(2) % 2 != 0 || inv_freq.numel() * 2 != q.dim(2))
    return shape_error("rope", "q " + describe(q) + ", k " + describe(k) + ", inv_freq " +
                                   describe(inv_freq) + " for " + std::to_string(n) + " step tokens");
  const int64_t hd = q.dim(2), half = hd / 2, hq = q.dim(1), hk = k.dim(1);
  const float* inv = inv_freq.ptr<const float>();
  float* qp = q.ptr<float>();
  float* kp = k.ptr<float>();
  pool_.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> c(half), s(half);
    for (int64_t t = t0; t < t1; ++t) {
      const float pos = static_cast<float>(step_.positions[t]);
      for (int64_t i = 0; i < half; ++i) {
        const float angle = pos * inv[i];  // fp32 product, as HF's freqs matmul
        c[i] = static_cast<float>(std::cos(static_cast<double>(angle)));
        s[i] = static_cast<float>(std::sin(static_cast<double>(angle)));
      }
      auto rotate = [&](float* x, int64_t heads) {
        for (int64_t h = 0; h < heads; ++h) {
          float* v = x + h * hd;
          for (int64_t i = 0; i < half; ++i) {
            const float a = v[i], b = v[i + half];
            v[i] = a * c[i] - b * s[i];
            v[i + half] = b * c[i] + a * s[i];
          }
        }
      };
      rotate(qp + t * hq * hd, hq);
      rotate(kp + t * hk * hd, hk);
    }
  });
  return ok_status();
}

}  // namespace spk::cpu
