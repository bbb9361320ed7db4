// Fusion rule "gemv grouping" (off: SPARKCTL_GEMV_GROUP=0): GEMVs that read the same x one after the other
// (q, k, v; gate, up) run as one launch. fused == unfused: tests/gpu/fusion_test.cpp.
#include "kernels/cuda/backend_impl.h"

namespace spk::cuda {

// A GEMV just queued alone: later GEMVs on the same x may join it, a silu_mul or residual add fold into it.
void CudaBackend::remember_gemv(const GemvSegment& seg, int m, int k, const float* x) {
  ph_.gemv = GemvOp::single(seg, m, k, x, x);
}

bool CudaBackend::fuse_gemv_group(const GemvSegment& seg, const float* x, int m, int k) {
  GemvOp& g = ph_.gemv;
  // (A fused GEMV never writes what its blocks read: y must not be the x it reads.)
  if (grouping_off_ || g.n == 0 || g.n >= kGemvMaxGroup || g.joins != x || g.m != m || g.k != k ||
      g.f.accum || g.f.swiglu_out || seg.y == g.x)
    return false;
  g.segs[g.n++] = seg;
  requeue_gemv();
  return true;
}

// Re-queues the pending GEMV (ph_.gemv) in place of the last op, with its segments and fusions.
void CudaBackend::requeue_gemv() { relaunch(OpId::linear, launch_gemv, ph_.gemv, kStream); }

}  // namespace spk::cuda
