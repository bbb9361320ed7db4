// Small random models for the model tests: a config per architecture, weights in memory (bf16 like
// real checkpoints, norms f32), the config.json text for it, and a naive double-precision forward of
// the whole architecture (no cache, no batching) that the paged, batched model must agree with.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "runtime/model/model_config.h"
#include "runtime/model/weight_source.h"

namespace spk::test {

inline rt::ModelConfig small_config(rt::Arch arch) {
  rt::ModelConfig c;
  c.arch = arch;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 97;
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000.0;
  c.torch_dtype = DType::bf16;
  switch (arch) {
    case rt::Arch::llama:
      c.architecture = "LlamaForCausalLM";
      c.rope_theta = 500000.0;
      c.rope_scaling = rt::RopeScaling{};                     // llama3, factor 8, low 1, high 4
      c.rope_scaling->original_max_position_embeddings = 64;  // small original ctx: all 3 bands used
      break;
    case rt::Arch::mistral:
      c.architecture = "MistralForCausalLM";
      c.sliding_window = 5;  // shorter than the test prompts, so the window matters
      break;
    case rt::Arch::qwen2:
      c.architecture = "Qwen2ForCausalLM";
      c.attention_bias = true;
      break;
    case rt::Arch::qwen3:
      c.architecture = "Qwen3ForCausalLM";
      c.qk_norm = true;
      c.tie_word_embeddings = true;
      c.head_dim = 24;  // Qwen3 decouples head_dim from hidden / heads
      break;
    default:  // mixture-of-experts families: random_moe_model.h
      break;
  }
  return c;
}

inline std::string config_json(const rt::ModelConfig& c) {
  nlohmann::json j = {{"architectures", {c.architecture}},
                      {"hidden_size", c.hidden_size},
                      {"intermediate_size", c.intermediate_size},
                      {"num_hidden_layers", c.num_hidden_layers},
                      {"num_attention_heads", c.num_attention_heads},
                      {"num_key_value_heads", c.num_key_value_heads},
                      {"head_dim", c.head_dim},
                      {"vocab_size", c.vocab_size},
                      {"max_position_embeddings", c.max_position_embeddings},
                      {"rms_norm_eps", c.rms_norm_eps},
                      {"rope_theta", c.rope_theta},
                      {"tie_word_embeddings", c.tie_word_embeddings},
                      {"hidden_act", "silu"},
                      {"torch_dtype", "bfloat16"}};
  if (c.rope_scaling)
    j["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", c.rope_scaling->factor},
        {"low_freq_factor", c.rope_scaling->low_freq_factor},
        {"high_freq_factor", c.rope_scaling->high_freq_factor},
        {"original_max_position_embeddings", c.rope_scaling->original_max_position_embeddings}};
  if (c.arch == rt::Arch::mistral) j["sliding_window"] = c.sliding_window;
  if (c.arch == rt::Arch::llama) j["attention_bias"] = c.attention_bias;
  return j.dump(2);
}

// Weights with a sane init (std 0.02 * sqrt(64 / fan_in) for matrices, norms around 1).
// Matrices stored as `matrix_dtype` (bf16, f16 or f32; values rounded to bf16 first either way, so every
// dtype holds the same numbers up to f16 rounding), vectors as f32.
inline std::shared_ptr<rt::MemoryWeights> random_weights(const rt::ModelConfig& c, uint64_t seed,
                                                         DType matrix_dtype = DType::bf16) {
  auto w = std::make_shared<rt::MemoryWeights>();
  std::mt19937_64 rng(seed);
  auto randn = [&](int64_t n, float scale, float mean = 0) {
    std::normal_distribution<float> d(mean, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
  };
  const int64_t H = c.hidden_size, I = c.intermediate_size, hq = c.num_attention_heads,
                hk = c.num_key_value_heads, hd = c.head_dim, V = c.vocab_size;
  auto mat = [&](const std::string& name, int64_t out, int64_t in) {
    std::vector<float> v = randn(out * in, 0.5f / std::sqrt(static_cast<float>(in)));
    for (auto& x : v) x = bf16_to_f32(f32_to_bf16(x));
    if (matrix_dtype == DType::f32)
      w->put_f32(name, {out, in}, v);
    else if (matrix_dtype == DType::f16)
      w->put_f16(name, {out, in}, v);
    else
      w->put_bf16(name, {out, in}, v);
  };
  auto vec = [&](const std::string& name, int64_t d, float scale, float mean) {
    w->put_f32(name, {d}, randn(d, scale, mean));
  };
  mat("model.embed_tokens.weight", V, H);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    vec(p + ".input_layernorm.weight", H, 0.1f, 1.0f);
    vec(p + ".post_attention_layernorm.weight", H, 0.1f, 1.0f);
    mat(p + ".self_attn.q_proj.weight", hq * hd, H);
    mat(p + ".self_attn.k_proj.weight", hk * hd, H);
    mat(p + ".self_attn.v_proj.weight", hk * hd, H);
    mat(p + ".self_attn.o_proj.weight", H, hq * hd);
    if (c.attention_bias) {
      vec(p + ".self_attn.q_proj.bias", hq * hd, 0.5f, 0);
      vec(p + ".self_attn.k_proj.bias", hk * hd, 0.5f, 0);
      vec(p + ".self_attn.v_proj.bias", hk * hd, 0.5f, 0);
      if (c.arch != rt::Arch::qwen2) vec(p + ".self_attn.o_proj.bias", H, 0.5f, 0);
    }
    if (c.qk_norm) {
      vec(p + ".self_attn.q_norm.weight", hd, 0.1f, 1.0f);
      vec(p + ".self_attn.k_norm.weight", hd, 0.1f, 1.0f);
    }
    mat(p + ".mlp.gate_proj.weight", I, H);
    mat(p + ".mlp.up_proj.weight", I, H);
    mat(p + ".mlp.down_proj.weight", H, I);
  }
  vec("model.norm.weight", H, 0.1f, 1.0f);
  if (!c.tie_word_embeddings) mat("lm_head.weight", V, H);
  return w;
}

// ---- naive double reference: logits for every position of one sequence ----
namespace ref {

using Vec = std::vector<double>;

inline Vec get(const rt::WeightSource& w, const std::string& name) {
  auto hw = w.get(name);
  if (!hw.ok()) return {};
  int64_t n = 1;
  for (auto d : hw->shape) n *= d;
  Vec v(n);
  for (int64_t i = 0; i < n; ++i)
    v[i] = hw->dtype == DType::f32 ? static_cast<const float*>(hw->data)[i]
                                   : bf16_to_f32(static_cast<const uint16_t*>(hw->data)[i]);
  return v;
}

// y[out] = W[out, in] x + b
inline Vec matvec(const Vec& W, const Vec& x, const Vec& b, int64_t out) {
  const int64_t in = static_cast<int64_t>(x.size());
  Vec y(out);
  for (int64_t o = 0; o < out; ++o) {
    double s = b.empty() ? 0 : b[o];
    for (int64_t i = 0; i < in; ++i) s += W[o * in + i] * x[i];
    y[o] = s;
  }
  return y;
}

inline void rmsnorm(Vec& x, const Vec& w, double eps, int64_t off, int64_t d) {
  double ss = 0;
  for (int64_t i = 0; i < d; ++i) ss += x[off + i] * x[off + i];
  const double inv = 1.0 / std::sqrt(ss / d + eps);
  for (int64_t i = 0; i < d; ++i) x[off + i] = x[off + i] * inv * w[i];
}

// `mlp`, when given, replaces the dense MLP of the layers it accepts: mlp(layer, h, out) returns false
// to leave the layer dense (the mixture-of-experts tests' naive reference plugs in here).
using MlpHook = std::function<bool(int layer, const Vec& h, Vec& out)>;

inline std::vector<Vec> forward(const rt::ModelConfig& c, const rt::WeightSource& w,
                                const std::vector<int32_t>& tokens, const MlpHook& mlp = {}) {
  const int64_t H = c.hidden_size, hq = c.num_attention_heads, hk = c.num_key_value_heads, hd = c.head_dim,
                I = c.intermediate_size, V = c.vocab_size, T = static_cast<int64_t>(tokens.size());
  // Inverse frequencies, llama3-scaled (the transformers formulas, in double).
  std::vector<double> inv(hd / 2);
  for (int64_t i = 0; i < hd / 2; ++i) {
    double f = std::pow(c.rope_theta, -2.0 * i / hd);
    if (c.rope_scaling) {
      const auto& s = *c.rope_scaling;
      const double wl = 2 * M_PI / f, low = s.original_max_position_embeddings / s.low_freq_factor,
                   high = s.original_max_position_embeddings / s.high_freq_factor;
      if (wl > low) {
        f /= s.factor;
      } else if (wl >= high) {
        const double sm = (s.original_max_position_embeddings / wl - s.low_freq_factor) /
                          (s.high_freq_factor - s.low_freq_factor);
        f = (1 - sm) * f / s.factor + sm * f;
      }
    }
    inv[i] = f;
  }
  auto rope = [&](Vec& x, int64_t heads, int64_t pos) {
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < hd / 2; ++i) {
        const double a = pos * inv[i], x1 = x[h * hd + i], x2 = x[h * hd + i + hd / 2];
        x[h * hd + i] = x1 * std::cos(a) - x2 * std::sin(a);
        x[h * hd + i + hd / 2] = x2 * std::cos(a) + x1 * std::sin(a);
      }
  };
  const Vec emb = get(w, "model.embed_tokens.weight");
  std::vector<Vec> x(T);
  for (int64_t t = 0; t < T; ++t) x[t].assign(emb.begin() + tokens[t] * H, emb.begin() + (tokens[t] + 1) * H);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l);
    const Vec ln1 = get(w, p + ".input_layernorm.weight"),
              ln2 = get(w, p + ".post_attention_layernorm.weight");
    const Vec Wq = get(w, p + ".self_attn.q_proj.weight"), Wk = get(w, p + ".self_attn.k_proj.weight"),
              Wv = get(w, p + ".self_attn.v_proj.weight"), Wo = get(w, p + ".self_attn.o_proj.weight");
    const Vec bq = get(w, p + ".self_attn.q_proj.bias"), bk = get(w, p + ".self_attn.k_proj.bias"),
              bv = get(w, p + ".self_attn.v_proj.bias"), bo = get(w, p + ".self_attn.o_proj.bias");
    const Vec qn = get(w, p + ".self_attn.q_norm.weight"), kn = get(w, p + ".self_attn.k_norm.weight");
    const Vec Wg = get(w, p + ".mlp.gate_proj.weight"), Wu = get(w, p + ".mlp.up_proj.weight"),
              Wd = get(w, p + ".mlp.down_proj.weight");
    std::vector<Vec> Q(T), K(T), Vv(T);
    for (int64_t t = 0; t < T; ++t) {
      Vec h = x[t];
      rmsnorm(h, ln1, c.rms_norm_eps, 0, H);
      Q[t] = matvec(Wq, h, bq, hq * hd);
      K[t] = matvec(Wk, h, bk, hk * hd);
      Vv[t] = matvec(Wv, h, bv, hk * hd);
      if (c.qk_norm) {
        for (int64_t i = 0; i < hq; ++i) rmsnorm(Q[t], qn, c.rms_norm_eps, i * hd, hd);
        for (int64_t i = 0; i < hk; ++i) rmsnorm(K[t], kn, c.rms_norm_eps, i * hd, hd);
      }
      rope(Q[t], hq, t);
      rope(K[t], hk, t);
    }
    for (int64_t t = 0; t < T; ++t) {
      Vec attn(hq * hd, 0.0);
      for (int64_t h = 0; h < hq; ++h) {
        const int64_t g = h / (hq / hk);
        const int64_t lo = c.sliding_window > 0 ? std::max<int64_t>(0, t - c.sliding_window + 1) : 0;
        std::vector<double> s;
        double mx = -1e300;
        for (int64_t j = lo; j <= t; ++j) {
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) d += Q[t][h * hd + i] * K[j][g * hd + i];
          s.push_back(d / std::sqrt(static_cast<double>(hd)));
          mx = std::max(mx, s.back());
        }
        double sum = 0;
        for (double& v : s) sum += (v = std::exp(v - mx));
        for (int64_t j = lo; j <= t; ++j)
          for (int64_t i = 0; i < hd; ++i) attn[h * hd + i] += s[j - lo] / sum * Vv[j][g * hd + i];
      }
      const Vec o = matvec(Wo, attn, bo, H);
      for (int64_t i = 0; i < H; ++i) x[t][i] += o[i];
      Vec h = x[t];
      rmsnorm(h, ln2, c.rms_norm_eps, 0, H);
      if (Vec out; mlp && mlp(l, h, out)) {
        for (int64_t i = 0; i < H; ++i) x[t][i] += out[i];
        continue;
      }
      const Vec g = matvec(Wg, h, {}, I), u = matvec(Wu, h, {}, I);
      Vec a(I);
      for (int64_t i = 0; i < I; ++i) a[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      const Vec d = matvec(Wd, a, {}, H);
      for (int64_t i = 0; i < H; ++i) x[t][i] += d[i];
    }
  }
  const Vec fn = get(w, "model.norm.weight");
  const Vec head = get(w, c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
  std::vector<Vec> logits(T);
  for (int64_t t = 0; t < T; ++t) {
    rmsnorm(x[t], fn, c.rms_norm_eps, 0, H);
    logits[t] = matvec(head, x[t], {}, V);
  }
  return logits;
}

}  // namespace ref
}  // namespace spk::test
