#include "runtime/model/moe.h"

#include <cmath>
#include <cstring>

#include "runtime/model/linear_gptq.h"

namespace spk::rt {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

Error disagree(const std::string& what) {
  return make_error(what, "the checkpoint and its config.json disagree: fix config.json or re-download it");
}

// The tensor with its shape checked; `missing` says which config fact made us expect it.
Result<HostWeight> get_shaped(const WeightSource& src, const std::string& name,
                              const std::vector<int64_t>& shape, const std::string& missing) {
  if (!src.has(name)) return disagree("tensor '" + name + "' is missing (" + missing + ")");
  SPK_ASSIGN(HostWeight hw, src.get(name));
  if (hw.shape != shape)
    return disagree("tensor '" + name + "' has shape " + shape_str(hw.shape) + ", config.json implies " +
                    shape_str(shape));
  if (hw.dtype != DType::f32 && hw.dtype != DType::bf16 && hw.dtype != DType::f16)
    return disagree("tensor '" + name + "' has dtype " + std::string(dtype_name(hw.dtype)) +
                    ", not a float weight dtype");
  return hw;
}

void append_f32(const HostWeight& hw, int64_t n, std::vector<float>& out) {
  const size_t at = out.size();
  out.resize(at + n);
  for (int64_t i = 0; i < n; ++i) {
    if (hw.dtype == DType::f32) {
      out[at + i] = static_cast<const float*>(hw.data)[i];
    } else {
      const uint16_t h = static_cast<const uint16_t*>(hw.data)[i];
      out[at + i] = hw.dtype == DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
  }
}

// Rows `rows` x columns `cols` of the [.., C] matrix that starts `base` elements into hw, in the
// backend's weight dtype (CPU: as stored, a view into the mmap when whole rows are taken, else a copy of
// just the slice; CUDA: bf16).
Result<Tensor> import_block(Backend& be, const WeightSource& src, const HostWeight& hw, int64_t base,
                            int64_t C, ShardRange rows, ShardRange cols) {
  const size_t esz = dtype_size(hw.dtype);
  const char* first = static_cast<const char*>(hw.data) + (base + int64_t{rows.begin} * C) * esz;
  if (cols.begin == 0 && cols.count == C)
    return be.import_weight(first, hw.dtype, {rows.count, C}, src.keepalive(), be.weight_dtype(hw.dtype));
  auto buf = std::make_shared<std::vector<char>>(static_cast<size_t>(rows.count) * cols.count * esz);
  for (int64_t r = 0; r < rows.count; ++r)
    std::memcpy(buf->data() + r * cols.count * esz, first + (r * C + cols.begin) * esz, cols.count * esz);
  return be.import_weight(buf->data(), hw.dtype, {rows.count, cols.count}, buf, be.weight_dtype(hw.dtype));
}

// One SiLU-GLU expert stored as three 2-D tensors gate/up [I, H], down [H, I]; this rank's slice `s`.
Result<ExpertWeights> load_expert_2d(Backend& be, const WeightSource& src, const std::string& gate,
                                     const std::string& up, const std::string& down, int64_t H, int64_t I,
                                     ShardRange s, const std::string& missing, const QuantConfig* q) {
  ExpertWeights e;
  const ShardRange all_h{0, static_cast<int>(H)};
  // GPTQ experts stay quantized (the backend's moe_ffn takes them as LinearWeight).
  const auto module = [](const std::string& n) {
    return n.substr(0, n.size() - std::string(".weight").size());
  };
  if (q && q->quantizes(module(gate))) {
    if (!be.supports_experts(WeightFormat::gptq_int4))
      return make_error(
          "backend '" + std::string(be.name()) + "' runs mixture-of-experts experts in " +
              "dense formats only, and " + module(gate) + " is " + q->describe(),
          "serve this checkpoint with --backend cpu, or a dense (bf16) checkpoint on this backend (CUDA: "
          "SPARKCTL_INT4_EXPERTS=0 turned the int4 expert kernels off: unset it)");
    SPK_ASSIGN(e.gate, load_gptq_linear(be, src, *q, module(gate), I, H, s, all_h));
    SPK_ASSIGN(e.up, load_gptq_linear(be, src, *q, module(up), I, H, s, all_h));
    SPK_ASSIGN(e.down, load_gptq_linear(be, src, *q, module(down), H, I, all_h, s));
    return e;
  }
  SPK_ASSIGN(HostWeight g, get_shaped(src, gate, {I, H}, missing));
  SPK_ASSIGN(HostWeight u, get_shaped(src, up, {I, H}, missing));
  SPK_ASSIGN(HostWeight d, get_shaped(src, down, {H, I}, missing));
  SPK_ASSIGN(e.gate, import_block(be, src, g, 0, H, s, all_h));
  SPK_ASSIGN(e.up, import_block(be, src, u, 0, H, s, all_h));
  SPK_ASSIGN(e.down, import_block(be, src, d, 0, I, all_h, s));
  return e;
}

}  // namespace

Status MoeMlp::load(Backend& be, const WeightSource& src, int layer, const ModelConfig& c,
                    const TpContext& tp) {
  const MoeConfig& m = *c.moe;
  SPK_ASSIGN(router, MoeRouter::make(m));
  comm = tp.comm;
  const int64_t H = c.hidden_size, I = m.moe_intermediate_size, E = m.num_experts;
  const std::string L = "model.layers." + std::to_string(layer) + ".";
  const bool mixtral = m.naming == MoeNaming::mixtral;
  const char* count_name = mixtral                       ? "num_local_experts"
                           : c.arch == Arch::deepseek_v3 ? "n_routed_experts"
                                                         : "num_experts";
  const std::string count_key = std::string(count_name) + " = " + std::to_string(E);
  // transformers 5 keeps experts fused in memory; a checkpoint written that way has them under mlp.experts.
  const std::string fused = L + "mlp.experts.gate_up_proj";
  const bool is_fused = src.has(fused);
  std::string base = L + (mixtral ? "block_sparse_moe" : "mlp");
  if (mixtral && !src.has(base + ".gate.weight") && src.has(L + "mlp.gate.weight")) base = L + "mlp";

  // Router (+ the shared-expert gate as one more row), fp32.
  std::vector<float> rw;
  SPK_ASSIGN(HostWeight r, get_shaped(src, base + ".gate.weight", {E, H},
                                      "layer " + std::to_string(layer) + " is a mixture-of-experts layer"));
  append_f32(r, E * H, rw);
  shared = m.shared_expert_intermediate_size > 0;
  shared_gated = shared && m.shared_expert_gated;
  if (shared_gated) {
    SPK_ASSIGN(HostWeight g, get_shaped(src, base + ".shared_expert_gate.weight", {1, H},
                                        "config.json gives shared_expert_intermediate_size"));
    append_f32(g, H, rw);
  }
  auto rbuf = std::make_shared<std::vector<float>>(std::move(rw));
  // Router rows (+ the shared-expert gate) in fp32 on the CPU; a GPU backend keeps them in its weight
  // dtype (bf16, exact for a bf16 checkpoint) and the routing math itself stays fp32 on the host.
  SPK_ASSIGN(gate_w, be.import_weight(rbuf->data(), DType::f32, {logit_rows(), H}, rbuf,
                                      be.weight_dtype(DType::f32)));
  if (m.score_correction_bias) {
    SPK_ASSIGN(HostWeight b, get_shaped(src, base + ".gate.e_score_correction_bias", {E},
                                        "the router selects with a score correction bias"));
    auto bb = std::make_shared<std::vector<float>>();
    append_f32(b, E, *bb);
    SPK_ASSIGN(bias, be.import_weight(bb->data(), DType::f32, {E}, bb, DType::f32));
  }

  // Routed experts, this rank's slice of each.
  const ShardRange s = tp.plan.moe_mlp, all_h{0, static_cast<int>(H)};
  experts.clear();
  experts.reserve(E + (shared ? 1 : 0));
  const QuantConfig* q = c.quant ? &*c.quant : nullptr;
  if (is_fused && q)
    return disagree("tensor '" + fused + "' holds fused experts, but " + q->path + " says the model is " +
                    q->describe() + ": quantized fused experts are not built yet (see issue 22)");
  if (is_fused) {
    SPK_ASSIGN(HostWeight gu, get_shaped(src, fused, {E, 2 * I, H}, count_key));
    SPK_ASSIGN(HostWeight dn, get_shaped(src, L + "mlp.experts.down_proj", {E, H, I}, count_key));
    for (int64_t e = 0; e < E; ++e) {
      ExpertWeights x;
      SPK_ASSIGN(x.gate, import_block(be, src, gu, e * 2 * I * H, H, s, all_h));
      SPK_ASSIGN(x.up, import_block(be, src, gu, e * 2 * I * H + I * H, H, s, all_h));
      SPK_ASSIGN(x.down, import_block(be, src, dn, e * H * I, I, all_h, s));
      experts.push_back(std::move(x));
    }
  } else {
    const char* n[3] = {"gate_proj", "up_proj", "down_proj"};
    if (mixtral) n[0] = "w1", n[1] = "w3", n[2] = "w2";
    auto name = [&](int64_t e, int i) {
      return base + ".experts." + std::to_string(e) + "." + n[i] + ".weight";
    };
    if (src.has(name(E, 0)))
      return disagree("tensor '" + name(E, 0) + "' is in the checkpoint but config.json says " + count_key +
                      " (experts 0.." + std::to_string(E - 1) + ")");
    for (int64_t e = 0; e < E; ++e) {
      SPK_ASSIGN(ExpertWeights x, load_expert_2d(be, src, name(e, 0), name(e, 1), name(e, 2), H, I, s,
                                                 "config.json says " + count_key, q));
      experts.push_back(std::move(x));
    }
  }
  if (shared) {
    const std::string p = base + "." + m.shared_expert_name + ".";
    SPK_ASSIGN(ExpertWeights x,
               load_expert_2d(be, src, p + "gate_proj.weight", p + "up_proj.weight", p + "down_proj.weight",
                              H, m.shared_expert_intermediate_size, tp.plan.shared_mlp,
                              "config.json gives shared_expert_intermediate_size", q));
    experts.push_back(std::move(x));
  }
  SPK_TRY(be.check_experts(experts, H));
  spec = router.spec();
  spec.shared = shared;
  spec.shared_gated = shared_gated;
  return ok_status();
}

Status MoeMlp::forward(Backend& be, Activations& a) const {
  const int64_t n = a.h.dim(0), S = slots();
  Tensor logits = a.router_logits.reshape({n, logit_rows()}), ids = a.moe_ids.reshape({n, S}),
         w = a.moe_w.reshape({n, S});
  SPK_TRY(be.linear(a.h, gate_w, nullptr, logits));
  SPK_TRY(be.moe_route(logits, spec, bias.empty() ? nullptr : &bias, ids, w));
  SPK_TRY(be.moe_ffn(a.h, experts, ids, w, a.delta));
  if (comm == nullptr || comm->world() == 1) return ok_status();
  return dist::all_reduce_sum(be, *comm, a.delta);
}

uint64_t MoeMlp::bytes() const {
  uint64_t b = gate_w.nbytes() + (bias.empty() ? 0 : bias.nbytes());
  for (const auto& e : experts) b += e.bytes();
  return b;
}

}  // namespace spk::rt
