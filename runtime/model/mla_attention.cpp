#include "runtime/model/mla_attention.h"

#include <algorithm>
#include <cmath>

namespace spk::rt {

Status MlaAttention::load(Backend& be, const WeightSource& src, const std::string& p, const ModelConfig& c,
                          const TpContext& tp) {
  const MlaConfig& m = *c.mla;
  const QuantConfig* q = c.quant ? &*c.quant : nullptr;
  for (const char* name : {".kv_a_proj_with_mqa", ".kv_b_proj"})
    if (q && q->quantizes(p + name))
      return make_error(
          p + name + " is " + q->describe() +
              ": quantized MLA latent projections are not built (kv_a is split and kv_b is "
              "absorbed at f32)",
          "use a checkpoint whose MLA projections stay unquantized (list them in the ignore list)");
  hq = tp.plan.q_heads.count;
  const int64_t H = c.hidden_size, heads = c.num_attention_heads, qk = m.qk_head_dim(), L = m.kv_lora_rank,
                R = m.qk_rope_head_dim, V = m.v_head_dim, nope = m.qk_nope_head_dim;
  const int h0 = tp.plan.q_heads.begin;
  const ShardRange q_rows{static_cast<int>(h0 * qk), static_cast<int>(hq * qk)};
  q_lora = m.q_lora_rank > 0;
  // transformers builds q_a_layernorm and kv_a_layernorm with DeepseekV3RMSNorm's default eps, 1e-6, not
  // rms_norm_eps.
  constexpr double kLoraEps = 1e-6;
  if (q_lora) {
    SPK_TRY(q_a_proj.load(be, src, p + ".q_a_proj", m.q_lora_rank, H, c.attention_bias, q));
    SPK_TRY(q_a_layernorm.load(be, src, p + ".q_a_layernorm.weight", m.q_lora_rank, kLoraEps));
    SPK_TRY(q_b_proj.load(be, src, p + ".q_b_proj", heads * qk, m.q_lora_rank, q_rows, false, q));
  } else {
    SPK_TRY(q_proj.load(be, src, p + ".q_proj", heads * qk, H, q_rows, false, q));
  }
  const std::string kv_a = p + ".kv_a_proj_with_mqa";
  SPK_TRY(kv_a_proj.load(be, src, kv_a, L + R, H, {0, static_cast<int>(L)}, c.attention_bias));
  SPK_TRY(
      k_pe_proj.load(be, src, kv_a, L + R, H, {static_cast<int>(L), static_cast<int>(R)}, c.attention_bias));
  SPK_TRY(kv_a_layernorm.load(be, src, p + ".kv_a_layernorm.weight", L, kLoraEps));
  SPK_ASSIGN(kv_b,
             load_weight_rows(be, src, p + ".kv_b_proj.weight", {heads * (nope + V), L},
                              {static_cast<int>(h0 * (nope + V)), static_cast<int>(hq * (nope + V))}, true));
  const ShardRange o_cols{static_cast<int>(h0 * V), static_cast<int>(hq * V)};
  SPK_TRY(o_proj.load(be, src, p + ".o_proj", H, heads * V, o_cols, c.attention_bias, *tp.comm, q));
  spec.kind = AttnKind::mla;
  spec.mla = mla_dims(m, c.rope());
  spec.scale = static_cast<float>(mla_softmax_scale(m, c.rope()));
  return ok_status();
}

Status MlaAttention::forward(Backend& be, Activations& a, const Tensor& inv_freq, KvCache& cache) const {
  const int64_t n = a.h.dim(0);
  const MlaDims& d = spec.mla;
  Tensor q = a.mla_q.rows(0, n).reshape({n, int64_t{hq}, int64_t{d.qk()}});
  Tensor q_flat = q.reshape({n, int64_t{hq} * d.qk()});
  if (q_lora) {
    Tensor qa = a.mla_qa.rows(0, n);
    SPK_TRY(q_a_proj.forward(be, a.h, qa));
    SPK_TRY(be.rmsnorm(qa, q_a_layernorm.w, q_a_layernorm.eps, qa));
    SPK_TRY(q_b_proj.forward(be, qa, q_flat));
  } else {
    SPK_TRY(q_proj.forward(be, a.h, q_flat));
  }
  Tensor latent = a.mla_latent.rows(0, n), k_pe = a.mla_kpe.rows(0, n);
  SPK_TRY(kv_a_proj.forward(be, a.h, latent));
  SPK_TRY(be.rmsnorm(latent, kv_a_layernorm.w, kv_a_layernorm.eps, latent));
  SPK_TRY(k_pe_proj.forward(be, a.h, k_pe));
  SPK_TRY(be.mla_rope(q, k_pe, inv_freq, spec));
  SPK_TRY(be.mla_kv_write(latent, k_pe, cache, spec));
  Tensor out = a.mla_out.rows(0, n).reshape({n, int64_t{hq}, int64_t{d.v}});
  SPK_TRY(be.mla_attention(q, cache, kv_b, spec, out));
  SPK_TRY(be.submit());
  return o_proj.forward(be, out.reshape({n, int64_t{hq} * d.v}), a.delta);
}

uint64_t MlaAttention::bytes() const {
  return q_a_proj.bytes() + q_a_layernorm.w.nbytes() + q_b_proj.bytes() + q_proj.bytes() + kv_a_proj.bytes() +
         k_pe_proj.bytes() + kv_a_layernorm.w.nbytes() + kv_b.nbytes() + o_proj.bytes();
}

uint64_t MlaAttention::floats_per_token(const ModelConfig& c, int hq) {
  if (!c.mla) return 0;
  const MlaConfig& m = *c.mla;
  return uint64_t(hq) * m.qk_head_dim() + uint64_t(std::max(m.q_lora_rank, 1)) + m.kv_lora_rank +
         m.qk_rope_head_dim + uint64_t(hq) * m.v_head_dim;
}

}  // namespace spk::rt
