// The multi-head latent attention facts of a DeepSeek-V2/V3 config.json (model_type deepseek_v3), kept apart
// from model_config as the MoE ones are. Defaults are DeepseekV3Config's. The attention itself:
// runtime/model/mla_attention.h; the kernels' view: MlaDims in kernels/attention/attn_spec.h.
#pragma once

#include "kernels/attention/attn_spec.h"
#include "kernels/base/status.h"
#include "runtime/model/config_reader.h"
#include "runtime/model/rope_config.h"

namespace spk::rt {

struct MlaConfig {
  int q_lora_rank = 1536;  // 0: q_lora_rank null in config.json, a plain q_proj
  int kv_lora_rank = 512;
  int qk_nope_head_dim = 128;
  int qk_rope_head_dim = 64;
  int v_head_dim = 128;
  bool rope_interleave = true;

  [[nodiscard]] int qk_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  [[nodiscard]] int latent_dim() const { return kv_lora_rank + qk_rope_head_dim; }  // cache values per token
};

Result<MlaConfig> parse_mla_config(const ConfigReader& r);

// The kernels' dims for this config and rope (yarn's attention factor multiplies cos and sin).
MlaDims mla_dims(const MlaConfig& m, const RopeConfig& rope);
// transformers' DeepseekV3Attention.scaling: qk_head_dim^-0.5, times mscale^2 with
// mscale = 0.1 * mscale_all_dim * ln(factor) + 1 when the rope is scaled and mscale_all_dim is set.
double mla_softmax_scale(const MlaConfig& m, const RopeConfig& rope);

}  // namespace spk::rt
