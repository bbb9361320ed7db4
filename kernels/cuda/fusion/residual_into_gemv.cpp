// Fusion rule "residual add into the previous GEMV" (off: SPARKCTL_RESIDUAL_FUSE=0): residual += x, where x
// is the output of the GEMV queued just before (o_proj, down_proj), is done by that GEMV; what is left of
// add_rmsnorm is rmsnorm(residual), which the next GEMV may absorb in turn. fused == unfused:
// tests/gpu/fusion_test.cpp.
#include "kernels/cuda/backend_impl.h"

namespace spk::cuda {

bool CudaBackend::fuse_residual_into_gemv(const float* x, float* residual, int rows, int dim) {
  GemvOp& g = ph_.gemv;
  if (!residual_fuse_ || !residual || residual == x || g.n != 1 || g.segs[0].y != x || g.segs[0].N != dim ||
      g.m != rows || g.x == residual || g.f.norm_w || g.f.swiglu_out || g.f.accum)
    return false;
  g.f.accum = residual;
  requeue_gemv();
  return true;
}

}  // namespace spk::cuda
