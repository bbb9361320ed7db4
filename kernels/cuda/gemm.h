// Linear layers for token counts above the GEMV's batch limit (prefill, large decode batches):
// cuBLASLt bf16 x bf16 -> fp32 with fp32 accumulation. Activations arrive fp32 and are rounded to
// bf16 once per call (documented tolerance: bf16 operands, ~1e-3..1e-2 relative).
#pragma once

#include <cublasLt.h>

#include "kernels/cuda/cuda_ops.h"

namespace spk::cuda {

class Gemm {
 public:
  // max_tokens x max_k bounds the bf16 staging buffer; workspace for cuBLASLt is allocated once so
  // that calls are capturable in a CUDA graph.
  static Result<Gemm*> create(int max_tokens, int max_k);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // y[M, N] = x[M, K] . W[N, K]^T (+ bias[N]); picks the GEMV for M <= kGemvMaxBatch.
  Status linear(const bf16* W, const float* bias, const float* x, int M, int N, int K, float* y,
                cudaStream_t s);

 private:
  Gemm() = default;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  bf16* xbf_ = nullptr;
  size_t xbf_elems_ = 0;
};

}  // namespace spk::cuda
