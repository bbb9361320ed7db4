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
  if (tab->qdev) {  // gptq-int4 experts
    SPK_TRY(
        grow(moe_scratch_, cuda::moe::carve(nullptr, n * k, sh.n_experts, d, sh.max_inter, nullptr, true)));
    launch(OpId::moe_ffn_w4a16, cuda::moe_ffn_w4a16, tab->qdev, sh, x.ptr<float>(), ids.ptr<int32_t>(),
           w.ptr<float>(), n, k, moe_scratch_.get(), out.ptr<float>(), sm_count_, tab->group_size,
           tab->down_group_size, kStream);
    return ok_status();
  }
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
namespace {

// The kernel's view of a gptq-int4 expert weight [out x in], or an error naming what it does not take. Each
// weight keeps its own group size (per-channel experts have a group of `in`, which differs between the routed
// and the shared expert).
Result<W4A16Weight> int4_view(const LinearWeight& lw, int64_t out, int64_t in, const std::string& what) {
  if (lw.format != WeightFormat::gptq_int4 || lw.out != out || lw.in != in || !lw.g_idx.empty() ||
      (lw.group_size > 0 && lw.group_size % 8 != 0) || out % 8 != 0 || in % 8 != 0)
    return make_error(
        "cuda moe_ffn: " + what + " is " + describe(lw) + (lw.g_idx.empty() ? "" : " with act-order g_idx") +
            " (expected gptq-int4 [" + std::to_string(out) + " x " + std::to_string(in) +
            "], a group size that is a multiple of 8, no act-order: the int4 expert kernels read "
            "groups in input order)",
        "quantize the experts without --desc-act, or serve this checkpoint with --backend cpu");
  W4A16Weight k;
  k.qweight = lw.values.ptr<int32_t>(), k.qzeros = lw.zeros.ptr<int32_t>();
  k.scales = lw.scales.ptr<uint16_t>();
  k.group_size = lw.group_size, k.N = static_cast<int>(out), k.K = static_cast<int>(in);
  return k;
}

// The int4 expert table of a layer of width d.
Result<std::vector<cuda::MoeExpertQ>> int4_table(const std::vector<ExpertWeights>& experts, int64_t d) {
  std::vector<cuda::MoeExpertQ> host(experts.size());
  for (size_t i = 0; i < experts.size(); ++i) {
    const ExpertWeights& e = experts[i];
    const int64_t I = e.inter();
    const std::string what = "expert " + std::to_string(i);
    SPK_ASSIGN(host[i].gate, int4_view(e.gate, I, d, what + " gate"));
    SPK_ASSIGN(host[i].up, int4_view(e.up, I, d, what + " up"));
    SPK_ASSIGN(host[i].down, int4_view(e.down, d, I, what + " down"));
    host[i].inter = static_cast<int>(I);
  }
  return host;
}

}  // namespace

Status CudaBackend::check_experts(const std::vector<ExpertWeights>& experts, int64_t d) const {
  if (experts.empty() || experts[0].gate.format != WeightFormat::gptq_int4) return ok_status();
  auto table = int4_table(experts, d);
  if (!table.ok()) return table.error();
  return ok_status();
}

// A table of `bytes` from `host` into fresh device storage of t; a table it replaces may still be read by
// what is queued, so that runs first.
Status CudaBackend::store_table(MoeTable& t, const void* host, size_t bytes, const std::string& what) {
  if (t.storage) SPK_TRY(before_move());
  t.dev = nullptr, t.qdev = nullptr;
  SPK_TRY(dev_alloc(t.storage, bytes, what));
  SPK_CUDA_CHECK(cudaMemcpy(t.storage.get(), host, bytes, cudaMemcpyHostToDevice));
  return ok_status();
}

// The device table of a gptq-int4 expert list (moe_w4a16.cu).
Result<const CudaBackend::MoeTable*> CudaBackend::moe_table_int4(const std::vector<ExpertWeights>& experts,
                                                                 int d) {
  SPK_ASSIGN(std::vector<cuda::MoeExpertQ> host, int4_table(experts, d));
  int max_inter = 0;
  for (const auto& e : host) max_inter = std::max(max_inter, e.inter);
  MoeTable& t = moe_tables_[experts.data()];
  if (t.qdev != nullptr && t.qhost.size() == host.size() &&
      std::memcmp(t.qhost.data(), host.data(), host.size() * sizeof(cuda::MoeExpertQ)) == 0)
    return &t;
  SPK_TRY(store_table(t, host.data(), host.size() * sizeof(cuda::MoeExpertQ),
                      "the int4 expert table of a " + std::to_string(host.size()) + "-expert layer"));
  t.qdev = static_cast<const cuda::MoeExpertQ*>(t.storage.get());
  t.qhost = std::move(host);
  t.max_inter = max_inter;
  t.group_size = experts[0].gate.group_size;  // the slices' alignment (each weight reads its own)
  t.down_group_size = experts[0].down.group_size;
  return &t;
}

Result<const CudaBackend::MoeTable*> CudaBackend::moe_table(const std::vector<ExpertWeights>& experts,
                                                            int d) {
  if (!experts.empty() && experts[0].gate.format == WeightFormat::gptq_int4)
    return moe_table_int4(experts, d);
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
  SPK_TRY(store_table(t, host.data(), host.size() * sizeof(cuda::MoeExpert),
                      "the expert table of a " + std::to_string(host.size()) + "-expert layer"));
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
