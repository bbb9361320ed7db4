// Fusion rule "rope + cache write into decode attention" (off: SPARKCTL_ATTN_ROPE_FUSE=0): at a decode step
// (one query per sequence) the attention of the q whose rope + cache write (rope_cache.cpp) was queued just
// before does both itself, with the GQA-shared kernel. fused == unfused: tests/gpu/fusion_test.cpp.
#include "kernels/cuda/backend_impl.h"

namespace spk::cuda {

bool CudaBackend::fuse_attention_rope(const AttnLaunch& plan, const float* q, const bf16* k_cache,
                                      const bf16* v_cache, const AttnArgs& a) {
  const DecodeRope r = ph_.rope_cache;
  if (!attn_rope_fuse_ || !plan.shared || plan.tiled || max_q_len_ != 1 || (plan.splits > 1 && !a.counters) ||
      r.q != q || r.k_cache != k_cache || r.v_cache != v_cache)
    return false;
  relaunch(OpId::attention_rope, paged_attention_rope, r, table_off_, positions_, tables_, a.n, a.hq, a.hk,
           a.d, block_size_, a.window, a.scale, a.out, kStream, plan.splits, a.partial, a.counters);
  ph_.rope_cache = DecodeRope{};
  return true;
}

}  // namespace spk::cuda
