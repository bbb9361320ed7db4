// Linear layers: the GEMV for small decode batches (grouped and fused with its neighbours), cuBLASLt
// for the rest.
#include "kernels/cuda/backend_impl.h"
#include "kernels/cuda/linear/select.h"

namespace spk::cuda {

Status CudaBackend::linear(const Tensor& x, const LinearWeight& lw, const Tensor* bias, Tensor& y) {
  // The weight-format chooser: dense bf16 is the only row yet (supports() refuses the rest at load).
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
  // Consecutive GEMMs on the same x (q/k/v, gate/up) share one fp32 -> bf16 staging pass: valid
  // while no other op ran in between (push() forgets it).
  const bool staged = staging_reuse_ && !gemv && ph_.staged_x == xp && ph_.staged_m == M && ph_.staged_k == k;
  // (A fused GEMV never writes what its blocks read: y must not be the x it reads.)
  if (gemv && !grouping_off_ && ph_.gemv.n > 0 && ph_.gemv.n < kGemvMaxGroup && ph_.gemv.joins == xp &&
      ph_.gemv.m == M && ph_.gemv.k == k && !ph_.gemv.f.accum && !ph_.gemv.f.swiglu_out && yp != ph_.gemv.x) {
    // The previous op is a GEMV on the same x (q then k then v; gate then up): one launch for all.
    ph_.gemv.segs[ph_.gemv.n++] = GemvSegment{wp, bp, yp, n};
    requeue_gemv();
    return ok_status();
  }
  if (gemv && ph_.norm.out == xp && ph_.norm.rows == M && ph_.norm.dim == k && yp != ph_.norm.x) {
    // The previous op is the rmsnorm that made x: the GEMV normalises on the fly (and still writes x).
    const NormOp nm = ph_.norm;
    ph_.gemv = GemvOp::single(GemvSegment{wp, bp, yp, n}, M, k, nm.x, xp);
    ph_.gemv.f.norm_w = nm.w, ph_.gemv.f.norm_eps = nm.eps, ph_.gemv.f.norm_out = nm.out;
    ph_.norm = NormOp{};
    requeue_gemv();
    return ok_status();
  }
  push(
      [=](cudaStream_t s) {
        if (gemv) return gemv_bf16(wp, bp, xp, M, n, k, yp, s);
        return g->linear(wp, bp, xp, M, n, k, yp, s, staged);
      },
      {op_id(OpId::linear), u(wp), u(bp), u(xp), u(yp), u(int64_t(M)), u(int64_t(n)), u(int64_t(k)),
       u(int64_t(gemv)), u(int64_t(staged)), gen_});
  if (!gemv) ph_.staged_x = xp, ph_.staged_m = M, ph_.staged_k = k;
  if (gemv) {
    ph_.gemv = GemvOp::single(GemvSegment{wp, bp, yp, n}, M, k, xp, xp);
  }
  return ok_status();
}

// Re-queues the pending GEMV (ph_.gemv) in place of the last op, with its segments and fusions.
void CudaBackend::requeue_gemv() {
  const GemvOp g = ph_.gemv;
  uint32_t eps_bits;
  std::memcpy(&eps_bits, &g.f.norm_eps, 4);
  std::vector<uint64_t> fp = {
      op_id(OpId::linear), u(g.x),   u(int64_t(g.m)), u(int64_t(g.k)), u(int64_t(g.n)),
      u(g.f.norm_w),       eps_bits, u(g.f.norm_out), u(g.f.accum),    u(g.f.swiglu_out),
      u(g.f.argmax),       gen_};
  for (int i = 0; i < g.n; ++i)
    fp.insert(fp.end(), {u(g.segs[i].W), u(g.segs[i].bias), u(g.segs[i].y), u(int64_t(g.segs[i].N))});
  queue_.replace_last(
      [=](cudaStream_t s) { return gemv_bf16_fused(g.segs.data(), g.n, g.x, g.m, g.k, g.f, s); }, fp);
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
