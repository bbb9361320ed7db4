// Mixture of experts: routing on the device and the expert FFN over the experts' pointer table.
#include "kernels/cuda/backend_impl.h"
#include "kernels/cuda/moe/moe_route.h"

namespace spk::cuda {

// Mixture-of-experts FFN (kernels/cuda/moe_ffn.cu, moe_gemm.cu). The experts' pointer table is built
// once per expert list (the layer's vector lives as long as the model) and the scratch only grows.
// Batches of SPARKCTL_MOE_GEMM_MIN_TOKENS tokens or more (default 64: prefill chunks, large decode
// batches) run the expert GEMMs on tensor cores; smaller ones the grouped GEMV (fp32 activations).
Status CudaBackend::moe_ffn(const Tensor& x, const std::vector<ExpertWeights>& experts, const Tensor& ids,
                            const Tensor& w, Tensor& out) {
  if (x.dtype != DType::f32 || x.rank() != 2 || out.dtype != DType::f32 || out.shape != x.shape ||
      ids.dtype != DType::i32 || ids.rank() != 2 || ids.dim(0) != x.dim(0) || w.dtype != DType::f32 ||
      w.shape != ids.shape || experts.empty())
    return op_error("moe_ffn", "x " + describe(x) + ", ids " + describe(ids) + ", w " + describe(w) +
                                   ", out " + describe(out) + ", " + std::to_string(experts.size()) +
                                   " experts");
  const int n = static_cast<int>(x.dim(0)), d = static_cast<int>(x.dim(1)), k = static_cast<int>(ids.dim(1));
  SPK_ASSIGN(const MoeTable* tab, moe_table(experts, d));
  const cuda::MoeShape sh{static_cast<int>(experts.size()), d, tab->max_inter,
                          tab->vec && d % 8 == 0 && (reinterpret_cast<uintptr_t>(x.ptr<float>()) & 15) == 0};
  SPK_TRY(grow(moe_scratch_, cuda::moe::carve(nullptr, n * k, sh.n_experts, d, sh.max_inter, nullptr)));
  const bool tc = sh.vec && n >= moe_gemm_min_;
  const cuda::MoeExpert* te = tab->dev;
  const float* xp = x.ptr<float>();
  const int32_t* ip = ids.ptr<int32_t>();
  const float* wp = w.ptr<float>();
  void* sp = moe_scratch_.get();
  float* op = out.ptr<float>();
  launch(OpId::moe_ffn, cuda::moe_ffn_bf16, te, sh, xp, ip, wp, n, k, sp, tc, op, kStream);
  return ok_status();
}

// Routing on the device (kernels/cuda/moe_route.cu); specs the kernel does not cover go the host way.
Status CudaBackend::moe_route(const Tensor& logits, const MoeRouteSpec& sp, const Tensor* bias, Tensor& ids,
                              Tensor& w) {
  const int64_t n = logits.rank() == 2 ? logits.dim(0) : -1;
  if (!cuda::moe_route_supported(sp) || logits.dtype != DType::f32 || logits.dim(-1) != sp.logit_cols() ||
      ids.dtype != DType::i32 || ids.numel() != n * sp.slots() || w.dtype != DType::f32 ||
      w.numel() != ids.numel() || (bias && (bias->dtype != DType::f32 || bias->numel() != sp.num_experts)))
    return Backend::moe_route(logits, sp, bias, ids, w);
  const float* lp = logits.ptr<float>();
  const float* bp = bias ? bias->ptr<float>() : nullptr;
  int32_t* ip = ids.ptr<int32_t>();
  float* wp = w.ptr<float>();
  const int nt = static_cast<int>(n);
  launch(OpId::moe_route, cuda::moe_route, sp, lp, nt, bp, ip, wp, kStream);
  return ok_status();
}

// Keyed by the vector's address, checked against its contents on every call: a freed list whose
// address a new one reuses (another model, a test) must not find the old pointers.
Result<const CudaBackend::MoeTable*> CudaBackend::moe_table(const std::vector<ExpertWeights>& experts,
                                                            int d) {
  std::vector<cuda::MoeExpert> host(experts.size());
  int max_inter = 0;
  bool vec = d % 8 == 0;
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; };
  for (size_t i = 0; i < experts.size(); ++i) {
    const ExpertWeights& e = experts[i];
    const Tensor &g = e.gate.values, &u = e.up.values, &dn = e.down.values;
    const bool dense = e.gate.format == WeightFormat::dense && e.up.format == WeightFormat::dense &&
                       e.down.format == WeightFormat::dense;
    const bool ok = dense && g.rank() == 2 && g.dtype == DType::bf16 && u.dtype == DType::bf16 &&
                    dn.dtype == DType::bf16 && g.dim(1) == d && u.shape == g.shape && dn.rank() == 2 &&
                    dn.dim(0) == d && dn.dim(1) == g.dim(0);
    if (!ok)
      return op_error("moe_ffn", "expert " + std::to_string(i) + ": gate " + describe(e.gate) + ", up " +
                                     describe(e.up) + ", down " + describe(e.down) + " for width " +
                                     std::to_string(d) + " (bf16 [inter, d] / [d, inter] expected)");
    host[i] = {g.ptr<bf16>(), u.ptr<bf16>(), dn.ptr<bf16>(), static_cast<int>(g.dim(0))};
    max_inter = std::max(max_inter, host[i].inter);
    vec = vec && host[i].inter % 8 == 0 && aligned(host[i].gate) && aligned(host[i].up) &&
          aligned(host[i].down);
  }
  MoeTable& t = moe_tables_[experts.data()];
  const auto same = [](const cuda::MoeExpert& a, const cuda::MoeExpert& b) {
    return a.gate == b.gate && a.up == b.up && a.down == b.down && a.inter == b.inter;
  };
  if (t.dev != nullptr && std::equal(host.begin(), host.end(), t.host.begin(), t.host.end(), same)) return &t;
  if (t.dev != nullptr) SPK_TRY(before_move());  // replaced: nothing queued may still read the old table
  t.dev = nullptr;
  SPK_TRY(dev_alloc(t.storage, host.size() * sizeof(cuda::MoeExpert),
                    "the expert table of a " + std::to_string(host.size()) + "-expert layer"));
  SPK_CUDA_CHECK(cudaMemcpy(t.storage.get(), host.data(), host.size() * sizeof(cuda::MoeExpert),
                            cudaMemcpyHostToDevice));
  t.dev = static_cast<const cuda::MoeExpert*>(t.storage.get());
  t.host = std::move(host);
  t.max_inter = max_inter;
  t.vec = vec;
  return &t;
}

Status CudaBackend::prepare_experts(const std::vector<ExpertWeights>& experts) {
  if (experts.empty() || experts[0].gate.in <= 0) return ok_status();  // moe_ffn names the problem
  auto t = moe_table(experts, static_cast<int>(experts[0].gate.in));
  return t.ok() ? ok_status() : Status(t.error());
}

}  // namespace spk::cuda
