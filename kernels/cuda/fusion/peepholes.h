// The CUDA backend's remembered fusion state: what the last queued op was, so that the next op may fold
// into it (a new op or a flush forgets it). Each rule has its own off-switch (kernels/knobs.h) and a case
// in tests/gpu/fusion_test.cpp (fused == unfused); the rules themselves are in the op that absorbs:
//   gemv grouping (q/k/v, gate/up on one x)   linear/linear_op.cpp            SPARKCTL_GEMV_GROUP
//   rmsnorm into the next GEMV                linear/linear_op.cpp            SPARKCTL_NORM_FUSE
//   residual add into the previous GEMV       elementwise/elementwise_op.cpp  SPARKCTL_NORM_FUSE
//   silu_mul into the gate/up GEMV            elementwise/elementwise_op.cpp  SPARKCTL_SWIGLU_FUSE
//   rope + kv_write                           kv/kv_op.cpp                    SPARKCTL_ROPE_FUSE
//   rope + cache write into decode attention  attention/attention_op.cpp      SPARKCTL_ATTN_ROPE_FUSE
//   lm_head GEMV argmax for the sampler       sample/sample_op.cpp            SPARKCTL_ARGMAX_FUSE
//   GEMM bf16 staging reuse                   linear/linear_op.cpp            SPARKCTL_STAGING_REUSE
#pragma once

#include <array>

#include "kernels/cuda/cuda_ops.h"

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
  NormOp norm;
  RopeOp rope;
  // The last queued op when it is a rope + cache write (q == nullptr: it is not), which a decode step's
  // attention on that q absorbs.
  DecodeRope rope_cache;
};

}  // namespace spk::cuda
