// spk::rope_inv_freq (kernels/backend.h): no backend needed, so config parsers and tools link it alone.
#include <cmath>

#include "kernels/backend.h"

namespace spk {

// Mirrors transformers' _compute_default_rope_parameters and _compute_llama3_parameters; computed in
// double and rounded once (HF computes in fp32: <= 1 ulp apart).
std::vector<float> rope_inv_freq(int rotary_dim, double theta, const Llama3RopeScaling* llama3) {
  std::vector<float> inv(rotary_dim / 2);
  for (int i = 0; i < rotary_dim / 2; ++i) {
    double f = 1.0 / std::pow(theta, static_cast<double>(2 * i) / rotary_dim);
    if (llama3) {
      const double old_ctx = llama3->original_max_position_embeddings;
      const double low_wavelen = old_ctx / llama3->low_freq_factor;
      const double high_wavelen = old_ctx / llama3->high_freq_factor;
      const double wavelen = 2.0 * M_PI / f;
      if (wavelen > low_wavelen) {
        f = f / llama3->factor;
      } else if (wavelen >= high_wavelen) {  // medium band: smooth interpolation
        const double smooth = (old_ctx / wavelen - llama3->low_freq_factor) /
                              (llama3->high_freq_factor - llama3->low_freq_factor);
        f = (1.0 - smooth) * f / llama3->factor + smooth * f;
      }
    }
    inv[i] = static_cast<float>(f);
  }
  return inv;
}

}  // namespace spk
