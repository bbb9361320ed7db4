// Small random mixture-of-experts models for the MoE tests: a config per family (awkward expert counts
// and widths, dense and sparse layers mixed), weights in memory in either Hugging Face layout (one 2-D
// tensor per expert, or transformers 5's fused 3-D experts), and a naive double-precision MoE MLP that
// plugs into random_model.h's reference forward.
#pragma once

#include <algorithm>
#include <numeric>

#include "tests/model/random_model.h"

namespace spk::test {

// The dense architecture whose attention a MoE family shares (the reference runs the twin's attention).
inline rt::Arch dense_twin(rt::Arch a) {
  return a == rt::Arch::qwen3_moe   ? rt::Arch::qwen3
         : a == rt::Arch::qwen2_moe ? rt::Arch::qwen2
                                    : rt::Arch::mistral;
}

inline rt::ModelConfig small_moe_config(rt::Arch arch) {
  rt::ModelConfig c = small_config(dense_twin(arch));
  c.arch = arch;
  rt::MoeConfig m;
  switch (arch) {
    case rt::Arch::qwen3_moe:  // layer 0 dense (mlp_only_layers), 1 and 2 sparse
      c.architecture = "Qwen3MoeForCausalLM";
      c.num_hidden_layers = 3;
      m.num_experts = 6, m.top_k = 3, m.moe_intermediate_size = 20, m.norm_topk_prob = true;
      m.mlp_only_layers = {0};
      break;
    case rt::Arch::qwen2_moe:  // decoder_sparse_step 2: layers 1 and 3 sparse; gated shared expert
      c.architecture = "Qwen2MoeForCausalLM";
      c.num_hidden_layers = 4;
      m.num_experts = 5, m.top_k = 2, m.moe_intermediate_size = 12, m.decoder_sparse_step = 2;
      m.shared_expert_intermediate_size = 24, m.shared_expert_gated = true;
      break;
    default:  // mixtral: every layer sparse, experts as wide as intermediate_size
      c.architecture = "MixtralForCausalLM";
      m.naming = rt::MoeNaming::mixtral;
      m.num_experts = 4, m.top_k = 2, m.moe_intermediate_size = c.intermediate_size, m.norm_topk_prob = true;
      break;
  }
  c.moe = m;
  return c;
}

inline std::string moe_config_json(const rt::ModelConfig& c) {
  nlohmann::json j = nlohmann::json::parse(config_json(c));
  const rt::MoeConfig& m = *c.moe;
  j["num_experts_per_tok"] = m.top_k;
  if (c.arch == rt::Arch::mixtral) {
    j["num_local_experts"] = m.num_experts;
  } else {
    j["num_experts"] = m.num_experts;
    j["moe_intermediate_size"] = m.moe_intermediate_size;
    j["norm_topk_prob"] = m.norm_topk_prob;
    j["decoder_sparse_step"] = m.decoder_sparse_step;
    j["mlp_only_layers"] = m.mlp_only_layers;
    if (m.shared_expert_intermediate_size > 0)
      j["shared_expert_intermediate_size"] = m.shared_expert_intermediate_size;
  }
  return j.dump(2);
}

// Dense weights of the twin plus every sparse layer's router and experts (bf16, as checkpoints ship).
// fused: transformers 5's layout (mlp.experts.gate_up_proj [E, 2I, H], mlp.experts.down_proj [E, H, I],
// mixtral's router at mlp.gate) instead of one tensor per expert.
inline std::shared_ptr<rt::MemoryWeights> random_moe_weights(const rt::ModelConfig& c, uint64_t seed,
                                                             bool fused = false) {
  rt::ModelConfig twin = c;
  twin.arch = dense_twin(c.arch);
  twin.moe.reset();
  auto w = random_weights(twin, seed);
  std::mt19937_64 rng(seed * 7919 + 17);
  auto randn = [&](int64_t n, float scale) {
    std::normal_distribution<float> d(0, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
  };
  const rt::MoeConfig& m = *c.moe;
  const int64_t H = c.hidden_size, I = m.moe_intermediate_size, E = m.num_experts;
  const bool mixtral = m.naming == rt::MoeNaming::mixtral;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    if (!m.is_moe_layer(l)) continue;
    const std::string L = "model.layers." + std::to_string(l) + ".";
    const std::string base = L + (mixtral ? "block_sparse_moe." : "mlp.");
    const float s_in = 0.5f / std::sqrt(static_cast<float>(H)), s_i = 0.5f / std::sqrt(static_cast<float>(I));
    const auto router = randn(E * H, 1.0f / std::sqrt(static_cast<float>(H)));
    w->put_bf16((fused && mixtral ? L + "mlp." : base) + "gate.weight", {E, H}, router);
    std::vector<float> gu, dn;
    for (int64_t e = 0; e < E; ++e) {
      const auto g = randn(I * H, s_in), u = randn(I * H, s_in), d = randn(H * I, s_i);
      if (fused) {
        gu.insert(gu.end(), g.begin(), g.end());
        gu.insert(gu.end(), u.begin(), u.end());
        dn.insert(dn.end(), d.begin(), d.end());
        continue;
      }
      const std::string x = base + "experts." + std::to_string(e) + ".";
      w->put_bf16(x + (mixtral ? "w1" : "gate_proj") + ".weight", {I, H}, g);
      w->put_bf16(x + (mixtral ? "w3" : "up_proj") + ".weight", {I, H}, u);
      w->put_bf16(x + (mixtral ? "w2" : "down_proj") + ".weight", {H, I}, d);
    }
    if (fused) {
      w->put_bf16(L + "mlp.experts.gate_up_proj", {E, 2 * I, H}, gu);
      w->put_bf16(L + "mlp.experts.down_proj", {E, H, I}, dn);
    }
    if (m.shared_expert_intermediate_size > 0) {
      const int64_t S = m.shared_expert_intermediate_size;
      const std::string x = base + m.shared_expert_name + ".";
      w->put_bf16(x + "gate_proj.weight", {S, H}, randn(S * H, s_in));
      w->put_bf16(x + "up_proj.weight", {S, H}, randn(S * H, s_in));
      w->put_bf16(x + "down_proj.weight", {H, S}, randn(H * S, 0.5f / std::sqrt(static_cast<float>(S))));
      if (m.shared_expert_gated) w->put_bf16(base + "shared_expert_gate.weight", {1, H}, randn(H, s_in));
    }
  }
  return w;
}

namespace ref {

// SiLU-GLU expert in double: down . (silu(gate . h) * (up . h)), weights rows of [I, H] / [H, I].
inline Vec expert(const Vec& Wg, const Vec& Wu, const Vec& Wd, const Vec& h, int64_t I) {
  const int64_t H = static_cast<int64_t>(h.size());
  const Vec g = matvec(Wg, h, {}, I), u = matvec(Wu, h, {}, I);
  Vec a(I);
  for (int64_t i = 0; i < I; ++i) a[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
  return matvec(Wd, a, {}, H);
}

// The naive MoE MLP of layer l (softmax router over all experts, top-k by sort, optional renormalisation,
// gated shared expert), reading the weights in whichever layout random_moe_weights wrote.
inline MlpHook moe_mlp(const rt::ModelConfig& c, const rt::WeightSource& w) {
  return [&c, &w](int l, const Vec& h, Vec& out) {
    const rt::MoeConfig& m = *c.moe;
    if (!m.is_moe_layer(l)) return false;
    const int64_t H = c.hidden_size, I = m.moe_intermediate_size, E = m.num_experts;
    const bool mixtral = m.naming == rt::MoeNaming::mixtral;
    const std::string L = "model.layers." + std::to_string(l) + ".";
    std::string base = L + (mixtral ? "block_sparse_moe." : "mlp.");
    const bool fused = w.has(L + "mlp.experts.gate_up_proj");
    Vec router = get(w, base + "gate.weight");
    if (router.empty()) router = get(w, L + "mlp.gate.weight");
    const Vec logits = matvec(router, h, {}, E);
    const double mx = *std::max_element(logits.begin(), logits.end());
    Vec p(E);
    double sum = 0;
    for (int64_t e = 0; e < E; ++e) sum += (p[e] = std::exp(logits[e] - mx));
    for (auto& x : p) x /= sum;
    std::vector<int64_t> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    double top = 0;
    for (int j = 0; j < m.top_k; ++j) top += p[order[j]];
    out.assign(H, 0.0);
    const Vec gu = fused ? get(w, L + "mlp.experts.gate_up_proj") : Vec{};
    const Vec dn = fused ? get(w, L + "mlp.experts.down_proj") : Vec{};
    for (int j = 0; j < m.top_k; ++j) {
      const int64_t e = order[j];
      const double wt = m.norm_topk_prob ? p[e] / top : p[e];
      Vec y;
      if (fused) {
        const Vec g(gu.begin() + e * 2 * I * H, gu.begin() + e * 2 * I * H + I * H);
        const Vec u(gu.begin() + e * 2 * I * H + I * H, gu.begin() + (e + 1) * 2 * I * H);
        const Vec d(dn.begin() + e * H * I, dn.begin() + (e + 1) * H * I);
        y = expert(g, u, d, h, I);
      } else {
        const std::string x = base + "experts." + std::to_string(e) + ".";
        y = expert(get(w, x + (mixtral ? "w1" : "gate_proj") + ".weight"),
                   get(w, x + (mixtral ? "w3" : "up_proj") + ".weight"),
                   get(w, x + (mixtral ? "w2" : "down_proj") + ".weight"), h, I);
      }
      for (int64_t i = 0; i < H; ++i) out[i] += wt * y[i];
    }
    if (m.shared_expert_intermediate_size > 0) {
      const std::string x = base + m.shared_expert_name + ".";
      const Vec y = expert(get(w, x + "gate_proj.weight"), get(w, x + "up_proj.weight"),
                           get(w, x + "down_proj.weight"), h, m.shared_expert_intermediate_size);
      double gate = 1;
      if (m.shared_expert_gated)
        gate = 1 / (1 + std::exp(-matvec(get(w, base + "shared_expert_gate.weight"), h, {}, 1)[0]));
      for (int64_t i = 0; i < H; ++i) out[i] += gate * y[i];
    }
    return true;
  };
}

}  // namespace ref
}  // namespace spk::test
