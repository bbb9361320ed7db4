// Linear layers for token counts above the GEMV's batch limit (prefill, large decode batches):
// cuBLASLt bf16 x bf16 -> fp32 with fp32 accumulation. Activations arrive fp32 and are rounded to
// bf16 once per call (documented tolerance: bf16 operands, ~1e-3..1e-2 relative).
#pragma once

#include <cublasLt.h>

#include <map>
#include <tuple>

#include "kernels/cuda/cuda_ops.h"

namespace spk::cuda {

class Gemm {
 public:
  // max_tokens x max_k bounds the bf16 staging buffer; workspace for cuBLASLt is allocated once so
  // that calls are capturable in a CUDA graph.
  static Result<Gemm*> create(int max_tokens, int max_k);
  // Device bytes create() allocates: the cuBLASLt workspace and the staging buffer.
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  static size_t bytes_for(int max_tokens, int max_k) {
    return kWorkspaceBytes + static_cast<size_t>(max_tokens) * static_cast<size_t>(max_k) * 2;
  }
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // y[M, N] = x[M, K] . W[N, K]^T (+ bias[N]) through cuBLASLt (any M >= 1; the caller picks the
  // GEMV for small M). x_staged: the staging buffer already holds this x in bf16 (the previous call had
  // the same x, M and K and nothing wrote x since): the conversion pass is skipped.
  Status linear(const bf16* W, const float* bias, const float* x, int M, int N, int K, float* y,
                cudaStream_t s, bool x_staged = false);

 private:
  Gemm() = default;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  bf16* xbf_ = nullptr;
  size_t xbf_elems_ = 0;
  // cuBLASLt's heuristic pick per (M, N, K): the query costs tens of us on the host per call, which
  // eager prefill steps (no graph) would pay for every linear.
  std::map<std::tuple<int, int, int>, cublasLtMatmulAlgo_t> algos_;
  // SPARKCTL_GEMM_AUTOTUNE=1: time the heuristic's top 8 per shape. Off by default: on the H200 it did
  // not beat the first pick (batch 32: 7.59 ms/step tuned vs 7.35 untuned, PERF_NOTES.md v2).
  bool autotune_ = false;
};

}  // namespace spk::cuda
