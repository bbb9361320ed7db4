// Multi-head latent attention (DeepSeek-V2/V3), the `self_attn` of a deepseek_v3 decoder layer, loaded
// from transformers' tensor names under model.layers.<l>.self_attn:
//   q_a_proj [q_lora, H] (+bias), q_a_layernorm [q_lora], q_b_proj [heads * qk, q_lora]   (q_lora_rank set)
//   q_proj [heads * qk, H]                                                                 (q_lora_rank null)
//   kv_a_proj_with_mqa [kv_lora + rope, H] (+bias), kv_a_layernorm [kv_lora],
//   kv_b_proj [heads * (nope + v), kv_lora], o_proj [H, heads * v] (+bias)
// Step: q (low-rank or plain) -> [n, hq, nope + rope]; latent = kv_a_layernorm(rows [0, kv_lora) of
// kv_a x), k_pe = rows [kv_lora, +rope) of kv_a x; mla_rope on q's rope part and k_pe; the latent cache
// takes [latent | k_pe] (kv_lora + rope values a token, not 2 x heads x head_dim); mla_attention up-projects
// through kv_b (or absorbs it); o_proj.
// Tensor parallelism: by heads. q_b_proj / q_proj and kv_b_proj are column-parallel (this rank's heads are
// contiguous rows), o_proj row-parallel (its all-reduce); q_a / kv_a and the latent cache are replicated
// (every rank computes the same latent).
#pragma once

#include <string>

#include "runtime/model/layers.h"

namespace spk::rt {

struct MlaAttention {
  bool q_lora = false;
  Linear q_a_proj;                 // q_lora
  RmsNorm q_a_layernorm;           // q_lora
  ColumnParallelLinear q_b_proj;   // q_lora: this rank's heads
  ColumnParallelLinear q_proj;     // no q_lora: this rank's heads
  ColumnParallelLinear kv_a_proj;  // rows [0, kv_lora) of kv_a_proj_with_mqa
  ColumnParallelLinear k_pe_proj;  // rows [kv_lora, kv_lora + rope)
  RmsNorm kv_a_layernorm;
  Tensor kv_b;  // [hq * (nope + v), kv_lora] f32, this rank's heads
  RowParallelLinear o_proj;
  int hq = 0;     // this rank's heads
  AttnSpec spec;  // AttnKind::mla with its dims and softmax scale

  Status load(Backend& be, const WeightSource& src, const std::string& prefix, const ModelConfig& c,
              const TpContext& tp);
  // a.h -> a.delta; writes this step's latents into the layer's cache.
  Status forward(Backend& be, Activations& a, const Tensor& inv_freq, KvCache& cache) const;
  [[nodiscard]] uint64_t bytes() const;
  // Per-token activation floats forward() uses (Activations::mla_*): for the memory plan.
  static uint64_t floats_per_token(const ModelConfig& c, int hq);
};

}  // namespace spk::rt
