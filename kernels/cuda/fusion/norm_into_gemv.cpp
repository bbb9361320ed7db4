// Fusion rule "rmsnorm into the next GEMV" (off: SPARKCTL_NORM_FUSE=0): a GEMV whose x is the output of the
// rmsnorm queued just before it normalises on the fly (and still writes that output, which later ops read).
// fused == unfused: tests/gpu/fusion_test.cpp.
#include "kernels/cuda/backend_impl.h"

namespace spk::cuda {

// An rmsnorm without residual add that a GEMV reading its output may absorb.
void CudaBackend::remember_norm(const float* x, const float* w, float eps, float* out, int rows, int dim) {
  if (norm_fuse_ && out != x) ph_.norm = NormOp{x, w, eps, out, rows, dim};
}

bool CudaBackend::fuse_norm_into_gemv(const GemvSegment& seg, const float* x, int m, int k) {
  const NormOp nm = ph_.norm;
  if (!norm_fuse_ || nm.out != x || nm.rows != m || nm.dim != k || seg.y == nm.x) return false;
  ph_.gemv = GemvOp::single(seg, m, k, nm.x, x);
  ph_.gemv.f.norm_w = nm.w, ph_.gemv.f.norm_eps = nm.eps, ph_.gemv.f.norm_out = nm.out;
  ph_.norm = NormOp{};
  requeue_gemv();
  return true;
}

}  // namespace spk::cuda
