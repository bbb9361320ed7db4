// The layer types a decoder-only model is assembled from. Each owns its backend tensors, loads itself
// from HF tensor names under a prefix (checking shapes, naming the tensor on error), and runs through
// the kernels seam only. Tensor parallelism later: Linear becomes column/row-parallel here.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "runtime/model/model_config.h"
#include "runtime/model/weight_source.h"

namespace spk::rt {

// Imports `name` into the backend after checking its shape; `want` as in Backend::import_weight
// (keep the checkpoint dtype, or f32). Error names the tensor, the expected and the found shape.
Result<Tensor> load_weight(Backend& be, const WeightSource& src, const std::string& name,
                           const std::vector<int64_t>& shape, bool to_f32);

struct Linear {
  Tensor w;     // [out, in], checkpoint dtype
  Tensor bias;  // [out] f32, empty when none
  Status load(Backend& be, const WeightSource& src, const std::string& prefix, int64_t out, int64_t in,
              bool with_bias);
  Status forward(Backend& be, const Tensor& x, Tensor& y) const {
    return be.linear(x, w, bias.empty() ? nullptr : &bias, y);
  }
  [[nodiscard]] uint64_t bytes() const { return w.nbytes() + bias.nbytes(); }
};

struct RmsNorm {
  Tensor w;  // [d] f32
  float eps = 1e-6f;
  Status load(Backend& be, const WeightSource& src, const std::string& name, int64_t d, double eps);
};

// Per-step activation buffers, [n, ...] views of tensors sized for the largest step so far.
struct Activations {
  Tensor resid, h, delta;  // [n, hidden]
  Tensor q, attn;          // [n, hq, hd]
  Tensor k, v;             // [n, hk, hd]
  Tensor gate, up, act;    // [n, intermediate]
};

struct SelfAttention {
  Linear q_proj, k_proj, v_proj, o_proj;
  RmsNorm q_norm, k_norm;  // Qwen3 only
  bool qk_norm = false;
  int hq = 0, hk = 0, hd = 0;
  AttnParams params;
  Status load(Backend& be, const WeightSource& src, const std::string& prefix, const ModelConfig& c);
  // a.h -> a.delta; writes this step's K/V into the layer's caches.
  Status forward(Backend& be, Activations& a, const Tensor& inv_freq, Tensor& k_cache, Tensor& v_cache) const;
};

struct Mlp {
  Linear gate_proj, up_proj, down_proj;
  Status load(Backend& be, const WeightSource& src, const std::string& prefix, const ModelConfig& c);
  Status forward(Backend& be, Activations& a) const;  // a.h -> a.delta
};

struct DecoderLayer {
  RmsNorm input_layernorm, post_attention_layernorm;
  SelfAttention self_attn;
  Mlp mlp;
  Status load(Backend& be, const WeightSource& src, int index, const ModelConfig& c);
  [[nodiscard]] uint64_t bytes() const;
};

}  // namespace spk::rt
