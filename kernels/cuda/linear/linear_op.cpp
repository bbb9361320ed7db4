// Linear layers: the GEMV for small decode batches (grouped and fused with its neighbours), cuBLASLt
// for the rest.
#include "kernels/cuda/backend_impl.h"
#include "kernels/cuda/linear/select.h"

namespace spk::cuda {
namespace {

// The cuBLASLt GEMM as a launch (Gemm::linear is a member).
Status gemm_linear(Gemm* g, const bf16* W, const float* bias, const float* x, int M, int N, int K, float* y,
                   cudaStream_t s, bool x_staged) {
  return g->linear(W, bias, x, M, N, K, y, s, x_staged);
}

}  // namespace

Status CudaBackend::linear(const Tensor& x, const LinearWeight& lw, const Tensor* bias, Tensor& y) {
  // The weight-format chooser: one row per format (supports() refuses the rest at load).
  if (lw.format == WeightFormat::gptq_int4) return linear_w4a16(x, lw, bias, y);
  if (lw.format != WeightFormat::dense)
    return make_error("cuda linear: weight " + describe(lw) + " is in a format this backend does not run",
                      "this is a caller bug: load checks Backend::supports() first");
  const Tensor& w = lw.values;
  if (w.rank() != 2 || w.dtype != DType::bf16)
    return make_error("cuda linear: weight " + describe(w) + " is not bf16",
                      "the CUDA backend runs bf16 checkpoints (synthesize with --dtype bf16)");
  const int64_t K = w.dim(1), N = w.dim(0);
  if (x.dtype != DType::f32 || x.numel() % K != 0 || y.numel() != x.numel() / K * N ||
      (bias && (bias->dtype != DType::f32 || bias->numel() != N)))
    return op_error("linear", "x " + describe(x) + ", w " + describe(w) + ", y " + describe(y));
  const int M = static_cast<int>(x.numel() / K);
  const bool gemv = linear_uses_gemv(M, K, gemv_max_);
  if (!gemv) SPK_TRY(ensure_gemm(M, static_cast<int>(K)));
  const auto* wp = w.ptr<bf16>();
  const float* bp = bias ? bias->ptr<float>() : nullptr;
  const float* xp = x.ptr<float>();
  float* yp = y.ptr<float>();
  Gemm* g = gemm_.get();
  const int n = static_cast<int>(N), k = static_cast<int>(K);
  const GemvSegment seg{wp, bp, yp, n};
  if (gemv) {
    if (fuse_gemv_group(seg, xp, M, k) || fuse_norm_into_gemv(seg, xp, M, k)) return ok_status();
    launch(OpId::linear, gemv_bf16, wp, bp, xp, M, n, k, yp, kStream);
    remember_gemv(seg, M, k, xp);
    return ok_status();
  }
  const bool staged = staged_for(xp, M, k);
  launch(OpId::linear_gemm, gemm_linear, g, wp, bp, xp, M, n, k, yp, kStream, staged);
  remember_staging(xp, M, k);
  return ok_status();
}

// cuBLASLt's workspace and bf16 staging for GEMMs of up to M x K (gemm.h).
Status CudaBackend::ensure_gemm(int M, int K) {
  if (gemm_ && M <= gemm_tokens_ && K <= gemm_k_) return ok_status();
  const int tokens = std::max(M, gemm_tokens_), k = std::max(K, gemm_k_);
  if (sealed_) {
    ++counts_->sealed;
    return make_error("cuda backend: the GEMM staging for " + std::to_string(M) + " x " + std::to_string(K) +
                          " needs " + std::to_string(Gemm::bytes_for(tokens, k)) +
                          " bytes after the KV pool was sized",
                      kStepKnob);
  }
  SPK_TRY(before_move());
  if (gemm_) counts_->live -= Gemm::bytes_for(gemm_tokens_, gemm_k_);
  gemm_.reset();
  auto g = Gemm::create(tokens, k);
  if (!g.ok())
    return make_error("cuda backend: the GEMM staging for " + std::to_string(tokens) + " x " +
                          std::to_string(k) + ": " + g.error().message,
                      "lower --gpu-memory-utilization or --max-num-batched-tokens");
  gemm_.reset(*g);
  gemm_tokens_ = tokens, gemm_k_ = k;
  counts_->add(Gemm::bytes_for(tokens, k));
  return ok_status();
}

}  // namespace spk::cuda
