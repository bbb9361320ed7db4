#include "runtime/model/layers.h"

#include <cmath>

#include "runtime/model/mla_attention.h"
#include "runtime/model/moe.h"

namespace spk::rt {

Status RmsNorm::load(Backend& be, const WeightSource& src, const std::string& name, int64_t d, double e) {
  SPK_ASSIGN(w, load_weight(be, src, name, {d}, true));
  eps = static_cast<float>(e);
  return ok_status();
}

Status SelfAttention::load(Backend& be, const WeightSource& src, const std::string& p, const ModelConfig& c,
                           const TpContext& tp) {
  hq = tp.plan.q_heads.count, hk = tp.plan.kv_heads.count, hd = c.head_dim;
  const int64_t H = c.hidden_size, HQ = int64_t{c.num_attention_heads} * hd,
                HK = int64_t{c.num_key_value_heads} * hd;
  const ShardRange qr{tp.plan.q_heads.begin * hd, hq * hd}, kvr{tp.plan.kv_heads.begin * hd, hk * hd};
  // HF: q/k/v carry a bias when attention_bias (Qwen2: always); o_proj too for Llama and Qwen3.
  const bool qkv_bias = c.attention_bias;
  const QuantConfig* q = c.quant ? &*c.quant : nullptr;
  const bool o_bias =
      c.attention_bias && (c.arch == Arch::llama || c.arch == Arch::qwen3 || c.arch == Arch::qwen3_moe);
  SPK_TRY(q_proj.load(be, src, p + ".q_proj", HQ, H, qr, qkv_bias, q));
  SPK_TRY(k_proj.load(be, src, p + ".k_proj", HK, H, kvr, qkv_bias, q));
  SPK_TRY(v_proj.load(be, src, p + ".v_proj", HK, H, kvr, qkv_bias, q));
  SPK_TRY(o_proj.load(be, src, p + ".o_proj", H, HQ, qr, o_bias, *tp.comm, q));
  qk_norm = c.qk_norm;
  if (qk_norm) {
    SPK_TRY(q_norm.load(be, src, p + ".q_norm.weight", hd, c.rms_norm_eps));
    SPK_TRY(k_norm.load(be, src, p + ".k_norm.weight", hd, c.rms_norm_eps));
  }
  // yarn multiplies cos and sin by its attention factor, so q.k carries its square.
  const double af = rope_attention_factor(c.rope());
  spec = AttnSpec::causal(static_cast<float>(af * af / std::sqrt(static_cast<double>(hd))));
  return ok_status();
}

Status SelfAttention::forward(Backend& be, Activations& a, const Tensor& inv_freq, KvCache& cache) const {
  const int64_t n = a.h.dim(0);
  Tensor q = a.q.reshape({n, int64_t{hq} * hd}), k = a.k.reshape({n, int64_t{hk} * hd}),
         v = a.v.reshape({n, int64_t{hk} * hd});
  SPK_TRY(q_proj.forward(be, a.h, q));
  SPK_TRY(k_proj.forward(be, a.h, k));
  SPK_TRY(v_proj.forward(be, a.h, v));
  if (qk_norm) {  // per-head RMSNorm before RoPE (Qwen3)
    SPK_TRY(be.rmsnorm(a.q, q_norm.w, q_norm.eps, a.q));
    SPK_TRY(be.rmsnorm(a.k, k_norm.w, k_norm.eps, a.k));
  }
  SPK_TRY(be.rope(a.q, a.k, inv_freq));
  SPK_TRY(be.kv_write(a.k, a.v, cache));
  SPK_TRY(be.attention(a.q, cache, spec, a.attn));
  // The ops so far may start (no fusion spans the attention -> o_proj boundary).
  SPK_TRY(be.submit());
  return o_proj.forward(be, a.attn.reshape({n, int64_t{hq} * hd}), a.delta);
}

Status Mlp::load(Backend& be, const WeightSource& src, const std::string& p, const ModelConfig& c,
                 const TpContext& tp) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const QuantConfig* q = c.quant ? &*c.quant : nullptr;
  SPK_TRY(gate_proj.load(be, src, p + ".gate_proj", I, H, tp.plan.mlp, c.mlp_bias, q));
  SPK_TRY(up_proj.load(be, src, p + ".up_proj", I, H, tp.plan.mlp, c.mlp_bias, q));
  return down_proj.load(be, src, p + ".down_proj", H, I, tp.plan.mlp, c.mlp_bias, *tp.comm, q);
}

Status Mlp::forward(Backend& be, Activations& a) const {
  SPK_TRY(gate_proj.forward(be, a.h, a.gate));
  SPK_TRY(up_proj.forward(be, a.h, a.up));
  SPK_TRY(be.silu_mul(a.gate, a.up, a.act));
  return down_proj.forward(be, a.act, a.delta);
}

Status DecoderLayer::load(Backend& be, const WeightSource& src, int index, const ModelConfig& c,
                          const TpContext& tp) {
  const std::string p = "model.layers." + std::to_string(index);
  SPK_TRY(input_layernorm.load(be, src, p + ".input_layernorm.weight", c.hidden_size, c.rms_norm_eps));
  SPK_TRY(post_attention_layernorm.load(be, src, p + ".post_attention_layernorm.weight", c.hidden_size,
                                        c.rms_norm_eps));
  if (c.mla) {
    mla = std::make_shared<MlaAttention>();
    SPK_TRY(require_support(be, AttnKind::mla, p + ".self_attn"));
    SPK_TRY(mla->load(be, src, p + ".self_attn", c, tp));
  } else {
    SPK_TRY(self_attn.load(be, src, p + ".self_attn", c, tp));
    self_attn.spec = AttnSpec::windowed(self_attn.spec.scale, c.layer_window(index));
    SPK_TRY(require_support(be, self_attn.spec.kind, p + ".self_attn"));
  }
  if (c.moe && c.moe->is_moe_layer(index)) {
    moe = std::make_shared<MoeMlp>();
    return moe->load(be, src, index, c, tp);
  }
  return mlp.load(be, src, p + ".mlp", c, tp);
}

Status DecoderLayer::forward_attn(Backend& be, Activations& a, const Tensor& inv_freq, KvCache& cache) const {
  return mla ? mla->forward(be, a, inv_freq, cache) : self_attn.forward(be, a, inv_freq, cache);
}

Status DecoderLayer::forward_mlp(Backend& be, Activations& a) const {
  return moe ? moe->forward(be, a) : mlp.forward(be, a);
}

uint64_t DecoderLayer::bytes() const {
  const auto& a = self_attn;
  return input_layernorm.w.nbytes() + post_attention_layernorm.w.nbytes() + a.q_proj.bytes() +
         a.k_proj.bytes() + a.v_proj.bytes() + a.o_proj.bytes() + a.q_norm.w.nbytes() + a.k_norm.w.nbytes() +
         mlp.gate_proj.bytes() + mlp.up_proj.bytes() + mlp.down_proj.bytes() + (moe ? moe->bytes() : 0) +
         (mla ? mla->bytes() : 0);
}

}  // namespace spk::rt
