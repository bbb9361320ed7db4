// Fusion rule "GEMM bf16 staging reuse" (off: SPARKCTL_STAGING_REUSE=0): consecutive cuBLASLt GEMMs on the
// same x (q/k/v, gate/up at prefill) share one fp32 -> bf16 staging pass, while no other op ran in between
// (every other op's push() forgets the staged x). fused == unfused: tests/gpu/fusion_test.cpp.
#include "kernels/cuda/backend_impl.h"

namespace spk::cuda {

bool CudaBackend::staged_for(const float* x, int m, int k) const {
  return staging_reuse_ && ph_.staged_x == x && ph_.staged_m == m && ph_.staged_k == k;
}

void CudaBackend::remember_staging(const float* x, int m, int k) {
  ph_.staged_x = x, ph_.staged_m = m, ph_.staged_k = k;
}

}  // namespace spk::cuda
