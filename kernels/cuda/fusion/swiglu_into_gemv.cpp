// Fusion rule "silu_mul into the gate/up GEMV" (off: SPARKCTL_SWIGLU_FUSE=0): silu(gate) * up, where gate
// and up are the two outputs of the grouped GEMV queued just before, is formed by that GEMV. fused ==
// unfused: tests/gpu/fusion_test.cpp.
#include "kernels/cuda/backend_impl.h"

namespace spk::cuda {

bool CudaBackend::fuse_swiglu_into_gemv(const float* gate, const float* up, int64_t n, float* out) {
  GemvOp& g = ph_.gemv;
  if (!swiglu_fuse_ || g.n != 2 || g.segs[0].y != gate || g.segs[1].y != up || g.segs[0].N != g.segs[1].N ||
      int64_t{g.segs[0].N} * g.m != n || g.f.accum)
    return false;
  g.f.swiglu_out = out;
  requeue_gemv();
  g.n = 0;  // nothing joins a GEMV whose outputs are consumed
  return true;
}

}  // namespace spk::cuda
