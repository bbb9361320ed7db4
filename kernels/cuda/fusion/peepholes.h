// The CUDA backend's remembered fusion state: what the last queued op was, so that the next op may fold
// into it (a new op or a flush forgets it). Each rule has a file here, its own off-switch (kernels/knobs.h)
// and a case in tests/gpu/fusion_test.cpp (fused == unfused):
//   gemv_group.cpp          GEMVs on one x (q/k/v, gate/up) share a launch        SPARKCTL_GEMV_GROUP
//   w4a16_group.cpp         the same for GPTQ int4 linears                         SPARKCTL_GEMV_GROUP
//   norm_into_gemv.cpp      rmsnorm into the next GEMV                             SPARKCTL_NORM_FUSE
//   residual_into_gemv.cpp  residual add into the previous GEMV                    SPARKCTL_RESIDUAL_FUSE
//   swiglu_into_gemv.cpp    silu_mul into the gate/up GEMV                         SPARKCTL_SWIGLU_FUSE
//   argmax_into_gemv.cpp    lm_head GEMV argmax for the sampler                    SPARKCTL_ARGMAX_FUSE
//   rope_cache.cpp          rope + kv_write                                        SPARKCTL_ROPE_FUSE
//   attention_rope.cpp      rope + cache write into decode attention               SPARKCTL_ATTN_ROPE_FUSE
//   staging_reuse.cpp       consecutive GEMMs on one x share the bf16 staging      SPARKCTL_STAGING_REUSE
#pragma once

#include <array>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/fingerprint.h"

namespace spk::cuda {

// The last queued op when it is a GEMV (n > 0): later GEMVs on the same x join it (q/k/v, gate/up),
// and a silu_mul of its outputs or a residual add of its output folds into it.
struct GemvOp {
  std::array<GemvSegment, kGemvMaxGroup> segs{};
  int n = 0, m = 0, k = 0;
  const float* x = nullptr;      // what the kernel reads (the un-normalised x when f.norm_w is set)
  const float* joins = nullptr;  // the x of the linears that may join: x, or f.norm_out
  GemvFusion f;
  static GemvOp single(GemvSegment seg, int m, int k, const float* x, const float* joins) {
    GemvOp g;
    g.segs[0] = seg;
    g.n = 1, g.m = m, g.k = k, g.x = x, g.joins = joins;
    return g;
  }
};

inline void fp_add(Fingerprint& f, const GemvOp& g) {
  fp_add(f, g.n), fp_add(f, g.m), fp_add(f, g.k), fp_add(f, g.x), fp_add(f, g.f);
  for (int i = 0; i < g.n; ++i) fp_add(f, g.segs[i]);
}
// The kernel of a pending GEMV with what joined it.
inline Status launch_gemv(const GemvOp& g, cudaStream_t s) {
  return gemv_bf16_fused(g.segs.data(), g.n, g.x, g.m, g.k, g.f, s);
}

// The last queued op when it is a W4A16 linear (g.n > 0): later ones on the same x [m, k] join it.
struct W4A16Op {
  W4A16Group g;
  const float* x = nullptr;
  int m = 0, sm_count = 0;
};
inline void fp_add(Fingerprint& f, const W4A16Op& o) {
  fp_add(f, o.g), fp_add(f, o.x), fp_add(f, o.m), fp_add(f, o.sm_count);
}
inline Status launch_w4a16(const W4A16Op& o, cudaStream_t s) {
  return w4a16_linear_group(o.g, o.x, o.m, o.sm_count, s);
}

// The last queued op when it is an rmsnorm without residual (out == nullptr: it is not), which a GEMV
// reading its output absorbs.
struct NormOp {
  const float* x = nullptr;
  const float* w = nullptr;
  float eps = 0.0f;
  float* out = nullptr;
  int rows = 0, dim = 0;
};

// The last queued op when it is a rope (k == nullptr: it is not), which a kv_write of that k joins.
struct RopeOp {
  float* q = nullptr;
  float* k = nullptr;
  const float* inv_freq = nullptr;
  int hq = 0, hk = 0, d = 0;
};

struct Peepholes {
  const float* staged_x = nullptr;  // x of the last queued GEMM, while its bf16 staging is current
  int staged_m = 0, staged_k = 0;
  GemvOp gemv;
  W4A16Op w4a16;
  NormOp norm;
  RopeOp rope;
  // The last queued op when it is a rope + cache write (q == nullptr: it is not), which a decode step's
  // attention on that q absorbs.
  DecodeRope rope_cache;
  // A new op or a flush ends every rule's window.
  void forget() {
    staged_x = nullptr;
    gemv.n = 0;
    w4a16.g.n = 0;
    norm = NormOp{};
    rope = RopeOp{};
    rope_cache = DecodeRope{};
  }
};

}  // namespace spk::cuda
