#include "runtime/model/layers.h"

#include <cmath>

namespace spk::rt {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace

Result<Tensor> load_weight(Backend& be, const WeightSource& src, const std::string& name,
                           const std::vector<int64_t>& shape, bool to_f32) {
  SPK_ASSIGN(HostWeight hw, src.get(name));
  if (hw.shape != shape)
    return make_error("tensor '" + name + "' has shape " + shape_str(hw.shape) + ", config.json implies " +
                          shape_str(shape),
                      "the checkpoint and its config.json disagree: regenerate or re-download it");
  return be.import_weight(hw.data, hw.dtype, shape, src.keepalive(), to_f32 ? DType::f32 : hw.dtype);
}

Status Linear::load(Backend& be, const WeightSource& src, const std::string& prefix, int64_t out, int64_t in,
                    bool with_bias) {
  SPK_ASSIGN(w, load_weight(be, src, prefix + ".weight", {out, in}, false));
  if (with_bias) {
    SPK_ASSIGN(bias, load_weight(be, src, prefix + ".bias", {out}, true));
  }
  return ok_status();
}

Status RmsNorm::load(Backend& be, const WeightSource& src, const std::string& name, int64_t d, double e) {
  SPK_ASSIGN(w, load_weight(be, src, name, {d}, true));
  eps = static_cast<float>(e);
  return ok_status();
}

Status SelfAttention::load(Backend& be, const WeightSource& src, const std::string& p, const ModelConfig& c) {
  hq = c.num_attention_heads, hk = c.num_key_value_heads, hd = c.head_dim;
  const int64_t H = c.hidden_size;
  // HF: q/k/v carry a bias when attention_bias (Qwen2: always); o_proj too for Llama and Qwen3.
  const bool qkv_bias = c.attention_bias;
  const bool o_bias = c.attention_bias && (c.arch == Arch::llama || c.arch == Arch::qwen3);
  SPK_TRY(q_proj.load(be, src, p + ".q_proj", int64_t{hq} * hd, H, qkv_bias));
  SPK_TRY(k_proj.load(be, src, p + ".k_proj", int64_t{hk} * hd, H, qkv_bias));
  SPK_TRY(v_proj.load(be, src, p + ".v_proj", int64_t{hk} * hd, H, qkv_bias));
  SPK_TRY(o_proj.load(be, src, p + ".o_proj", H, int64_t{hq} * hd, o_bias));
  qk_norm = c.qk_norm;
  if (qk_norm) {
    SPK_TRY(q_norm.load(be, src, p + ".q_norm.weight", hd, c.rms_norm_eps));
    SPK_TRY(k_norm.load(be, src, p + ".k_norm.weight", hd, c.rms_norm_eps));
  }
  params.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(hd)));
  params.sliding_window = c.sliding_window;
  return ok_status();
}

Status SelfAttention::forward(Backend& be, Activations& a, const Tensor& inv_freq, Tensor& k_cache,
                              Tensor& v_cache) const {
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
  SPK_TRY(be.kv_write(a.k, a.v, k_cache, v_cache));
  SPK_TRY(be.attention(a.q, k_cache, v_cache, params, a.attn));
  return o_proj.forward(be, a.attn.reshape({n, int64_t{hq} * hd}), a.delta);
}

Status Mlp::load(Backend& be, const WeightSource& src, const std::string& p, const ModelConfig& c) {
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  SPK_TRY(gate_proj.load(be, src, p + ".gate_proj", I, H, false));
  SPK_TRY(up_proj.load(be, src, p + ".up_proj", I, H, false));
  return down_proj.load(be, src, p + ".down_proj", H, I, false);
}

Status Mlp::forward(Backend& be, Activations& a) const {
  SPK_TRY(gate_proj.forward(be, a.h, a.gate));
  SPK_TRY(up_proj.forward(be, a.h, a.up));
  SPK_TRY(be.silu_mul(a.gate, a.up, a.act));
  return down_proj.forward(be, a.act, a.delta);
}

Status DecoderLayer::load(Backend& be, const WeightSource& src, int index, const ModelConfig& c) {
  const std::string p = "model.layers." + std::to_string(index);
  SPK_TRY(input_layernorm.load(be, src, p + ".input_layernorm.weight", c.hidden_size, c.rms_norm_eps));
  SPK_TRY(post_attention_layernorm.load(be, src, p + ".post_attention_layernorm.weight", c.hidden_size,
                                        c.rms_norm_eps));
  SPK_TRY(self_attn.load(be, src, p + ".self_attn", c));
  return mlp.load(be, src, p + ".mlp", c);
}

uint64_t DecoderLayer::bytes() const {
  const auto& a = self_attn;
  return input_layernorm.w.nbytes() + post_attention_layernorm.w.nbytes() + a.q_proj.bytes() +
         a.k_proj.bytes() + a.v_proj.bytes() + a.o_proj.bytes() + a.q_norm.w.nbytes() + a.k_norm.w.nbytes() +
         mlp.gate_proj.bytes() + mlp.up_proj.bytes() + mlp.down_proj.bytes();
}

}  // namespace spk::rt
