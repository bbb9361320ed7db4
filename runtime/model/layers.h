// The layer types a decoder-only model is assembled from. Each owns its backend tensors, loads itself
// from HF tensor names under a prefix (checking shapes, naming the tensor on error), and runs through
// the kernels seam only. Tensor parallelism: q/k/v and gate/up are column-parallel (this rank's heads /
// MLP columns), o_proj and down_proj row-parallel (they own the all-reduce); head counts and widths
// below are this rank's (the whole model with world 1).
#pragma once

#include <memory>
#include <string>

#include "kernels/backend.h"
#include "runtime/model/linear.h"
#include "runtime/model/model_config.h"

namespace spk::rt {

struct RmsNorm {
  Tensor w;  // [d] f32
  float eps = 1e-6f;
  Status load(Backend& be, const WeightSource& src, const std::string& name, int64_t d, double eps);
};

// Per-step activation buffers, [n, ...] views of tensors sized for the largest step so far. Head and
// intermediate dims are this rank's.
struct Activations {
  Tensor resid, h, delta;  // [n, hidden]
  Tensor q, attn;          // [n, hq, hd]
  Tensor k, v;             // [n, hk, hd]
  Tensor gate, up, act;    // [n, intermediate]
  Tensor router_logits;    // MoE models: [n, experts (+1 shared-expert gate)]
  Tensor moe_ids, moe_w;   // MoE models: [n, top_k (+1 shared expert)] i32 / f32
  // MLA models (mla_attention.h): q [n, hq * (nope + rope)], q_a [n, q_lora], latent [n, kv_lora],
  // k_pe [n, rope], out [n, hq * v].
  Tensor mla_q, mla_qa, mla_latent, mla_kpe, mla_out;
};

// What a layer needs to know about tensor parallelism (world 1: the single communicator).
struct TpContext {
  TpShardPlan plan;
  dist::Communicator* comm = nullptr;
};

struct SelfAttention {
  ColumnParallelLinear q_proj, k_proj, v_proj;
  RowParallelLinear o_proj;
  RmsNorm q_norm, k_norm;  // Qwen3 only
  bool qk_norm = false;
  int hq = 0, hk = 0, hd = 0;  // this rank's query and KV heads
  AttnSpec spec;               // causal, or sliding when the layer has a window
  Status load(Backend& be, const WeightSource& src, const std::string& prefix, const ModelConfig& c,
              const TpContext& tp);
  // a.h -> a.delta; writes this step's K/V into the layer's caches.
  Status forward(Backend& be, Activations& a, const Tensor& inv_freq, KvCache& cache) const;
};

struct Mlp {
  ColumnParallelLinear gate_proj, up_proj;
  RowParallelLinear down_proj;
  Status load(Backend& be, const WeightSource& src, const std::string& prefix, const ModelConfig& c,
              const TpContext& tp);
  Status forward(Backend& be, Activations& a) const;  // a.h -> a.delta
};

struct MoeMlp;        // moe.h
struct MlaAttention;  // mla_attention.h

struct DecoderLayer {
  RmsNorm input_layernorm, post_attention_layernorm;
  SelfAttention self_attn;            // empty in MLA models
  std::shared_ptr<MlaAttention> mla;  // deepseek_v3: multi-head latent attention instead
  Status forward_attn(Backend& be, Activations& a, const Tensor& inv_freq, KvCache& cache) const;
  Mlp mlp;                                                // dense layers
  std::shared_ptr<MoeMlp> moe;                            // mixture-of-experts layers (then `mlp` is empty)
  Status forward_mlp(Backend& be, Activations& a) const;  // a.h -> a.delta, whichever MLP the layer has
  Status load(Backend& be, const WeightSource& src, int index, const ModelConfig& c, const TpContext& tp);
  [[nodiscard]] uint64_t bytes() const;
};

}  // namespace spk::rt
