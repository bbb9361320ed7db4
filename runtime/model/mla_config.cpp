#include "runtime/model/mla_config.h"

#include <cmath>

namespace spk::rt {

Result<MlaConfig> parse_mla_config(const ConfigReader& r) {
  MlaConfig m;
  // q_lora_rank: null = no low-rank query (DeepSeek-V2-Lite); absent = the class default.
  if (r.j.contains("q_lora_rank") && r.j["q_lora_rank"].is_null()) {
    m.q_lora_rank = 0;
  } else {
    SPK_ASSIGN(m.q_lora_rank, r.integer("q_lora_rank", m.q_lora_rank));
  }
  SPK_ASSIGN(m.kv_lora_rank, r.integer("kv_lora_rank", m.kv_lora_rank));
  SPK_ASSIGN(m.qk_nope_head_dim, r.integer("qk_nope_head_dim", m.qk_nope_head_dim));
  SPK_ASSIGN(m.qk_rope_head_dim, r.integer("qk_rope_head_dim", m.qk_rope_head_dim));
  SPK_ASSIGN(m.v_head_dim, r.integer("v_head_dim", m.v_head_dim));
  SPK_ASSIGN(m.rope_interleave, r.boolean("rope_interleave", true));
  if (m.qk_rope_head_dim % 2 != 0)
    return r.bad("qk_rope_head_dim", "must be even for RoPE, got " + std::to_string(m.qk_rope_head_dim));
  return m;
}

namespace {
double yarn_mscale(double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; }
}  // namespace

MlaDims mla_dims(const MlaConfig& m, const RopeConfig& rope) {
  MlaDims d;
  d.kv_lora = m.kv_lora_rank, d.nope = m.qk_nope_head_dim, d.rope = m.qk_rope_head_dim, d.v = m.v_head_dim;
  d.interleave = m.rope_interleave;
  d.rope_factor = static_cast<float>(rope_attention_factor(rope));
  return d;
}

double mla_softmax_scale(const MlaConfig& m, const RopeConfig& rope) {
  double s = 1.0 / std::sqrt(static_cast<double>(m.qk_head_dim()));
  if (rope.scaling && rope.scaling->mscale_all_dim != 0) {
    const double ms = yarn_mscale(rope.scaling->factor, rope.scaling->mscale_all_dim);
    s *= ms * ms;
  }
  return s;
}

}  // namespace spk::rt
