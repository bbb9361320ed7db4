// Fusion rule "lm_head GEMV argmax" (off: SPARKCTL_ARGMAX_FUSE=0): the GEMV that wrote the logits queued
// just before sample() also leaves each row's argmax for the sampler, so greedy rows skip the scan of the
// vocabulary. fused == unfused: tests/gpu/fusion_test.cpp.
#include "kernels/cuda/backend_impl.h"

namespace spk::cuda {

unsigned long long* CudaBackend::fuse_argmax_into_gemv(const float* logits, int rows, int vocab) {
  GemvOp& g = ph_.gemv;
  if (!argmax_fuse_ || g.n != 1 || g.segs[0].y != logits || g.segs[0].N != vocab || g.m != rows ||
      g.f.accum || g.f.swiglu_out)
    return nullptr;
  g.f.argmax = static_cast<unsigned long long*>(argmax_.get());
  requeue_gemv();
  return g.f.argmax;
}

}  // namespace spk::cuda
