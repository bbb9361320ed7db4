#include "kernels/backend.h"

#ifdef SPARKCTL_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

#include <cmath>

#include "kernels/cpu/cpu_backend.h"

namespace spk {

namespace {
Error step_error(std::string_view op, const std::string& what) {
  return make_error(std::string(op) + ": " + what, "this is a caller bug in the model graph: report it");
}
}  // namespace

Result<std::vector<int32_t>> check_step_meta(const StepMeta& meta) {
  if (meta.block_size <= 0) return step_error("begin_step", "block_size " + std::to_string(meta.block_size));
  if (meta.slots.size() != meta.positions.size())
    return step_error("begin_step", std::to_string(meta.slots.size()) + " slots for " +
                                        std::to_string(meta.positions.size()) + " positions");
  std::vector<int32_t> token_seq(meta.positions.size(), -1);
  for (size_t s = 0; s < meta.seqs.size(); ++s) {
    const SeqMeta& q = meta.seqs[s];
    const int64_t nblocks = (static_cast<int64_t>(q.ctx_len) + meta.block_size - 1) / meta.block_size;
    const std::string which = "sequence " + std::to_string(s);
    if (q.q_len < 0 || q.q_len > q.ctx_len || q.q_start < 0 ||
        static_cast<size_t>(q.q_start) + q.q_len > meta.positions.size())
      return step_error("begin_step", which + ": q_start " + std::to_string(q.q_start) + ", q_len " +
                                          std::to_string(q.q_len) + ", ctx_len " + std::to_string(q.ctx_len) +
                                          " do not fit " + std::to_string(meta.positions.size()) + " tokens");
    if (q.bt_offset < 0 || static_cast<size_t>(q.bt_offset) + nblocks > meta.block_tables.size())
      return step_error("begin_step", which + ": block table shorter than ceil(ctx_len / block_size) = " +
                                          std::to_string(nblocks));
    for (int32_t i = q.q_start; i < q.q_start + q.q_len; ++i) {
      if (token_seq[i] != -1)
        return step_error("begin_step", "token row " + std::to_string(i) + " in two sequences");
      if (meta.positions[i] < 0 || meta.positions[i] >= q.ctx_len)
        return step_error("begin_step", which + ": position " + std::to_string(meta.positions[i]) +
                                            " outside ctx_len " + std::to_string(q.ctx_len));
      token_seq[i] = static_cast<int32_t>(s);
    }
  }
  for (size_t i = 0; i < token_seq.size(); ++i)
    if (token_seq[i] < 0)
      return step_error("begin_step", "token row " + std::to_string(i) + " in no sequence");
  return token_seq;
}

Status Backend::moe_route(const Tensor& logits, const MoeRouteSpec& spec, const Tensor* bias, Tensor& ids,
                          Tensor& w) {
  const int64_t n = logits.rank() == 2 ? logits.dim(0) : -1, S = spec.slots();
  if (logits.dtype != DType::f32 || logits.rank() != 2 || logits.dim(1) != spec.logit_cols() ||
      ids.dtype != DType::i32 || ids.numel() != n * S || w.dtype != DType::f32 || w.numel() != n * S ||
      (bias != nullptr && (bias->dtype != DType::f32 || bias->numel() != spec.num_experts)))
    return make_error("moe_route: logits " + describe(logits) + ", ids " + describe(ids) + ", w " +
                          describe(w) + " for " + std::to_string(spec.num_experts) + " experts, " +
                          std::to_string(S) + " slots",
                      "a caller bug: report it");
  std::vector<float> lg(static_cast<size_t>(n * spec.logit_cols())), wt(static_cast<size_t>(n * S)), b;
  std::vector<int32_t> id(static_cast<size_t>(n * S));
  SPK_TRY(download(logits, lg.data(), lg.size() * sizeof(float)));
  if (bias != nullptr) {
    b.resize(spec.num_experts);
    SPK_TRY(download(*bias, b.data(), b.size() * sizeof(float)));
  }
  moe_route_reference(spec, lg.data(), n, bias ? b.data() : nullptr, id.data(), wt.data());
  SPK_TRY(upload(ids, id.data(), id.size() * sizeof(int32_t)));
  return upload(w, wt.data(), wt.size() * sizeof(float));
}

namespace {
Status refuse(const Backend& be, std::string_view kind, std::string_view variant, const std::string& what) {
  return make_error(what + " needs " + std::string(kind) + " '" + std::string(variant) +
                        "', which backend '" + std::string(be.name()) + "' does not run",
                    "run it with --backend cpu (the reference runs every format), or use a checkpoint / "
                    "--kv-cache-dtype this backend lists");
}
}  // namespace

Status Backend::no_mla(const AttnSpec& spec) const {
  (void)spec;
  return refuse(*this, "attention kind", attn_kind_name(AttnKind::mla), "this model (DeepSeek-style MLA)");
}

Status require_support(const Backend& be, WeightFormat f, const std::string& what) {
  return be.supports(f) ? ok_status() : refuse(be, "weight format", weight_format_name(f), what);
}
Status require_support(const Backend& be, KvFormat f, const std::string& what) {
  return be.supports(f) ? ok_status() : refuse(be, "KV cache format", kv_format_name(f), what);
}
Status require_support(const Backend& be, AttnKind k, const std::string& what) {
  return be.supports(k) ? ok_status() : refuse(be, "attention kind", attn_kind_name(k), what);
}

Result<std::unique_ptr<Backend>> make_backend(const BackendOptions& opts) {
  if (opts.name == "cpu") return std::unique_ptr<Backend>(cpu::make_cpu_backend(opts.threads));
  if (opts.name == "cuda") {
#ifdef SPARKCTL_HAVE_CUDA
    return cuda::make_cuda_backend();
#else
    return make_error("backend 'cuda' is not built in this binary (configured without nvcc)",
                      "use --backend cpu, or rebuild where the CUDA toolkit is installed");
#endif
  }
  return make_error("unknown backend '" + opts.name + "'", "use --backend cpu");
}

}  // namespace spk
