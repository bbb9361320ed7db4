// Fusion rule "rope + KV cache write" (off: SPARKCTL_ROPE_FUSE=0): a kv_write of the k that the rope queued
// just before rotated runs as one kernel with it (rope_and_cache). fused == unfused:
// tests/gpu/fusion_test.cpp.
#include "kernels/cuda/backend_impl.h"

namespace spk::cuda {

// A rope just queued: a kv_write of its k right after may join it.
void CudaBackend::remember_rope(const RopeOp& r) { ph_.rope = r; }

bool CudaBackend::fuse_rope_cache(const float* k, const float* v, const int32_t* slots, int n, int hk, int d,
                                  bf16* k_cache, bf16* v_cache) {
  const RopeOp r = ph_.rope;
  if (!rope_fuse_ || r.k != k || r.hk != hk || r.d != d) return false;
  relaunch(OpId::rope_and_cache, cuda::rope_and_cache, r.q, r.k, v, positions_, r.inv_freq, slots, n, r.hq,
           hk, d, k_cache, v_cache, kStream);
  ph_.rope = RopeOp{};
  ph_.rope_cache = DecodeRope{r.q, r.k, v, r.inv_freq, slots, k_cache, v_cache};  // attention_rope.cpp
  return true;
}

}  // namespace spk::cuda
