// Small random DeepSeek-V3 (MLA + grouped sigmoid MoE) models for the MLA tests: a config (with or without
// q_lora, yarn, attention biases), f32 weights in memory under transformers' names (synth_tensor_specs),
// in either expert layout, and a naive double-precision forward written from transformers'
// modeling_deepseek_v3.py (keys and values up-projected per token, interleaved rope, mscale) that the
// paged model must agree with.
#pragma once

#include <algorithm>
#include <map>
#include <numeric>

#include "runtime/checkpoint/synth_model.h"
#include "tests/model/random_moe_model.h"

namespace spk::test {

struct MlaVariant {
  bool q_lora = true, yarn = true, bias = false, interleave = true;
};

inline rt::ModelConfig small_mla_config(const MlaVariant& v = {}) {
  rt::ModelConfig c;
  c.arch = rt::Arch::deepseek_v3;
  c.architecture = "DeepseekV3ForCausalLM";
  c.hidden_size = 48, c.intermediate_size = 40, c.num_hidden_layers = 3;
  c.num_attention_heads = c.num_key_value_heads = 4;
  // rms_norm_eps 1e-5: the decoder norms take it, q_a / kv_a_layernorm keep transformers' 1e-6.
  c.vocab_size = 97, c.max_position_embeddings = 4096, c.rms_norm_eps = 1e-5, c.rope_theta = 10000.0;
  c.attention_bias = v.bias;
  rt::MlaConfig m;
  m.q_lora_rank = v.q_lora ? 24 : 0, m.kv_lora_rank = 20, m.qk_nope_head_dim = 12, m.qk_rope_head_dim = 8;
  m.v_head_dim = 10, m.rope_interleave = v.interleave;
  c.mla = m;
  c.head_dim = m.qk_rope_head_dim;
  if (v.yarn) {  // a small original context so the ramp covers the rope dims; mscale != mscale_all_dim
    rt::RopeScaling y;
    y.rope_type = "yarn", y.factor = 4, y.original_max_position_embeddings = 64, y.mscale = 0.9;
    y.mscale_all_dim = 0.7;
    c.rope_scaling = y;
  }
  rt::MoeConfig e;
  e.num_experts = 6, e.top_k = 2, e.moe_intermediate_size = 12, e.norm_topk_prob = true;
  e.n_group = 3, e.topk_group = 2, e.routed_scaling_factor = 2.5, e.first_k_dense_replace = 1;
  e.score = rt::MoeScore::sigmoid, e.score_correction_bias = true;
  e.shared_expert_intermediate_size = 12, e.shared_expert_name = "shared_experts";
  c.moe = e;
  return c;
}

// Every tensor of synth_tensor_specs(c) in f32 (norms near 1, a decisive router, fan-in scaled linears);
// fused: the routed experts as transformers 5's mlp.experts.gate_up_proj / down_proj instead.
inline std::shared_ptr<rt::MemoryWeights> random_mla_weights(const rt::ModelConfig& c, uint64_t seed,
                                                             bool fused = false) {
  auto w = std::make_shared<rt::MemoryWeights>();
  std::mt19937_64 rng(seed);
  const int64_t H = c.hidden_size, I = c.moe->moe_intermediate_size, E = c.moe->num_experts;
  std::map<std::string, std::vector<float>> experts;  // fused: collected, then written per layer
  for (const rt::TensorSpec& t : rt::synth_tensor_specs(c)) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    const bool norm = t.name.find("norm") != std::string::npos;
    const bool router = t.name.size() > 12 && t.name.compare(t.name.size() - 12, 12, "gate.weight") == 0 &&
                        t.name.find("mlp.gate.") != std::string::npos;
    const float s = norm                                                     ? 0.1f
                    : t.name.find("e_score_correction") != std::string::npos ? 0.05f
                    : router                                                 ? 2.0f / std::sqrt(float(H))
                    : t.name.find(".bias") != std::string::npos              ? 0.1f
                                                                : 0.5f / std::sqrt(float(t.shape.back()));
    std::normal_distribution<float> d(0, s);
    std::vector<float> v(n);
    for (auto& x : v) x = (norm ? 1.0f : 0.0f) + d(rng);
    const auto at = t.name.find(".mlp.experts.");
    if (fused && at != std::string::npos) {
      experts[t.name] = std::move(v);
      continue;
    }
    w->put_f32(t.name, t.shape, v);
  }
  if (fused)
    for (int l = 0; l < c.num_hidden_layers; ++l) {
      if (!c.moe->is_moe_layer(l)) continue;
      const std::string L = "model.layers." + std::to_string(l) + ".mlp.experts.";
      std::vector<float> gu, dn;
      for (int64_t e = 0; e < E; ++e) {
        const std::string x = L + std::to_string(e) + ".";
        for (const char* n : {"gate_proj", "up_proj"}) {
          const auto& g = experts[x + n + ".weight"];
          gu.insert(gu.end(), g.begin(), g.end());
        }
        const auto& dd = experts[x + "down_proj.weight"];
        dn.insert(dn.end(), dd.begin(), dd.end());
      }
      w->put_f32(L + "gate_up_proj", {E, 2 * I, H}, gu);
      w->put_f32(L + "down_proj", {E, H, I}, dn);
    }
  return w;
}

namespace ref {

// The MoE of a deepseek_v3 layer in double: sigmoid scores, + bias for the choice, groups by the sum of
// their top-2, masked groups' choices 0, top-k, renormalised, * routed_scaling_factor, + shared experts.
inline MlpHook deepseek_moe(const rt::ModelConfig& c, const rt::WeightSource& w) {
  return [&c, &w](int l, const Vec& h, Vec& out) {
    const rt::MoeConfig& m = *c.moe;
    if (!m.is_moe_layer(l)) return false;
    const int64_t H = c.hidden_size, I = m.moe_intermediate_size, E = m.num_experts, per = E / m.n_group;
    const std::string L = "model.layers." + std::to_string(l) + ".mlp.";
    const Vec logits = matvec(get(w, L + "gate.weight"), h, {}, E),
              bias = get(w, L + "gate.e_score_correction_bias");
    Vec score(E), choice(E);
    for (int64_t e = 0; e < E; ++e) choice[e] = (score[e] = 1 / (1 + std::exp(-logits[e]))) + bias[e];
    std::vector<std::pair<double, int64_t>> groups;
    for (int64_t g = 0; g < m.n_group; ++g) {
      Vec s(choice.begin() + g * per, choice.begin() + (g + 1) * per);
      std::sort(s.rbegin(), s.rend());
      groups.push_back({s[0] + s[1], g});
    }
    std::stable_sort(groups.begin(), groups.end(), [](auto a, auto b) { return a.first > b.first; });
    for (size_t r = m.topk_group; r < groups.size(); ++r)
      std::fill(choice.begin() + groups[r].second * per, choice.begin() + (groups[r].second + 1) * per, 0.0);
    std::vector<int64_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return choice[a] > choice[b]; });
    double sum = 0;
    for (int j = 0; j < m.top_k; ++j) sum += score[order[j]];
    const bool fused = w.has(L + "experts.gate_up_proj");
    const Vec gu = fused ? get(w, L + "experts.gate_up_proj") : Vec{},
              dn = fused ? get(w, L + "experts.down_proj") : Vec{};
    out.assign(H, 0.0);
    for (int j = 0; j < m.top_k; ++j) {
      const int64_t e = order[j];
      const double wt = (m.norm_topk_prob ? score[e] / (sum + 1e-20) : score[e]) * m.routed_scaling_factor;
      const std::string x = L + "experts." + std::to_string(e) + ".";
      const Vec y = fused ? expert(Vec(gu.begin() + e * 2 * I * H, gu.begin() + e * 2 * I * H + I * H),
                                   Vec(gu.begin() + e * 2 * I * H + I * H, gu.begin() + (e + 1) * 2 * I * H),
                                   Vec(dn.begin() + e * H * I, dn.begin() + (e + 1) * H * I), h, I)
                          : expert(get(w, x + "gate_proj.weight"), get(w, x + "up_proj.weight"),
                                   get(w, x + "down_proj.weight"), h, I);
      for (int64_t i = 0; i < H; ++i) out[i] += wt * y[i];
    }
    const std::string s = L + "shared_experts.";
    const Vec y = expert(get(w, s + "gate_proj.weight"), get(w, s + "up_proj.weight"),
                         get(w, s + "down_proj.weight"), h, m.shared_expert_intermediate_size);
    for (int64_t i = 0; i < H; ++i) out[i] += y[i];
    return true;
  };
}

// The whole deepseek_v3 model in double, every position (no cache).
inline std::vector<Vec> mla_forward(const rt::ModelConfig& c, const rt::WeightSource& w,
                                    const std::vector<int32_t>& tokens) {
  const rt::MlaConfig& m = *c.mla;
  const int64_t H = c.hidden_size, hq = c.num_attention_heads, T = static_cast<int64_t>(tokens.size()),
                L = m.kv_lora_rank, R = m.qk_rope_head_dim, nope = m.qk_nope_head_dim, Vd = m.v_head_dim,
                qk = m.qk_head_dim();
  const std::vector<float> inv = rt::rope_inv_freq(static_cast<int>(R), c.rope());
  const double af = rt::rope_attention_factor(c.rope());
  double scale = 1 / std::sqrt(double(qk));
  if (c.rope_scaling && c.rope_scaling->mscale_all_dim != 0) {
    const double ms = 0.1 * c.rope_scaling->mscale_all_dim * std::log(c.rope_scaling->factor) + 1;
    scale *= ms * ms;
  }
  auto rope = [&](double* x, int64_t pos) {  // transformers: de-interleave, then rotate_half
    Vec y(x, x + R);
    if (m.rope_interleave)
      for (int64_t i = 0; i < R / 2; ++i) y[i] = x[2 * i], y[R / 2 + i] = x[2 * i + 1];
    for (int64_t i = 0; i < R / 2; ++i) {
      const double a = double(float(pos) * inv[i]), cs = std::cos(a) * af, sn = std::sin(a) * af;
      x[i] = y[i] * cs - y[R / 2 + i] * sn;
      x[R / 2 + i] = y[R / 2 + i] * cs + y[i] * sn;
    }
  };
  const MlpHook moe = deepseek_moe(c, w);
  const Vec emb = get(w, "model.embed_tokens.weight");
  std::vector<Vec> x(T);
  for (int64_t t = 0; t < T; ++t) x[t].assign(emb.begin() + tokens[t] * H, emb.begin() + (tokens[t] + 1) * H);
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".", a = p + "self_attn.";
    std::vector<Vec> Q(T), K(T), Vv(T);  // [hq * qk], [hq * qk], [hq * Vd]
    for (int64_t t = 0; t < T; ++t) {
      Vec h = x[t];
      rmsnorm(h, get(w, p + "input_layernorm.weight"), c.rms_norm_eps, 0, H);
      if (m.q_lora_rank > 0) {
        Vec qa = matvec(get(w, a + "q_a_proj.weight"), h, get(w, a + "q_a_proj.bias"), m.q_lora_rank);
        rmsnorm(qa, get(w, a + "q_a_layernorm.weight"), 1e-6, 0, m.q_lora_rank);  // transformers: default eps
        Q[t] = matvec(get(w, a + "q_b_proj.weight"), qa, {}, hq * qk);
      } else {
        Q[t] = matvec(get(w, a + "q_proj.weight"), h, {}, hq * qk);
      }
      Vec ckv =
          matvec(get(w, a + "kv_a_proj_with_mqa.weight"), h, get(w, a + "kv_a_proj_with_mqa.bias"), L + R);
      rmsnorm(ckv, get(w, a + "kv_a_layernorm.weight"), 1e-6, 0, L);
      const Vec kv =
          matvec(get(w, a + "kv_b_proj.weight"), Vec(ckv.begin(), ckv.begin() + L), {}, hq * (nope + Vd));
      rope(ckv.data() + L, t);
      K[t].resize(hq * qk), Vv[t].resize(hq * Vd);
      for (int64_t hh = 0; hh < hq; ++hh) {
        rope(Q[t].data() + hh * qk + nope, t);
        std::copy_n(kv.begin() + hh * (nope + Vd), nope, K[t].begin() + hh * qk);
        std::copy_n(ckv.begin() + L, R, K[t].begin() + hh * qk + nope);
        std::copy_n(kv.begin() + hh * (nope + Vd) + nope, Vd, Vv[t].begin() + hh * Vd);
      }
    }
    const Vec Wo = get(w, a + "o_proj.weight"), bo = get(w, a + "o_proj.bias");
    for (int64_t t = 0; t < T; ++t) {
      Vec attn(hq * Vd, 0.0);
      for (int64_t hh = 0; hh < hq; ++hh) {
        Vec s(t + 1);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j <= t; ++j) {
          double d = 0;
          for (int64_t i = 0; i < qk; ++i) d += Q[t][hh * qk + i] * K[j][hh * qk + i];
          mx = std::max(mx, s[j] = d * scale);
        }
        for (double& v : s) sum += (v = std::exp(v - mx));
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t i = 0; i < Vd; ++i) attn[hh * Vd + i] += s[j] / sum * Vv[j][hh * Vd + i];
      }
      const Vec o = matvec(Wo, attn, bo, H);
      for (int64_t i = 0; i < H; ++i) x[t][i] += o[i];
      Vec h = x[t], out;
      rmsnorm(h, get(w, p + "post_attention_layernorm.weight"), c.rms_norm_eps, 0, H);
      if (!moe(l, h, out)) {
        const std::string d = p + "mlp.";
        out = expert(get(w, d + "gate_proj.weight"), get(w, d + "up_proj.weight"),
                     get(w, d + "down_proj.weight"), h, c.intermediate_size);
      }
      for (int64_t i = 0; i < H; ++i) x[t][i] += out[i];
    }
  }
  const Vec head = get(w, c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight");
  std::vector<Vec> logits(T);
  for (int64_t t = 0; t < T; ++t) {
    rmsnorm(x[t], get(w, "model.norm.weight"), c.rms_norm_eps, 0, H);
    logits[t] = matvec(head, x[t], {}, c.vocab_size);
  }
  return logits;
}

}  // namespace ref
}  // namespace spk::test
