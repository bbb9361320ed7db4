// config.json -> MoeConfig for Qwen3-MoE, Qwen2-MoE and Mixtral.
#include "runtime/model/moe_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace spk::rt {

namespace {

using nlohmann::json;

struct Keys {
  const json& j;
  const std::string& path;

  Error bad(const std::string& key, const std::string& what) const {
    return make_error(path + ": key \"" + key + "\" " + what, "fix config.json or regenerate the checkpoint");
  }
  bool present(const char* key) const { return j.contains(key) && !j[key].is_null(); }
  Result<int> integer(const char* key, int def, int min = 1) const {
    if (!present(key)) return def;
    const json& v = j[key];
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > INT32_MAX)
      return bad(key, "must be an integer >= " + std::to_string(min) + ", got " + v.dump());
    return v.get<int>();
  }
  Result<bool> boolean(const char* key, bool def) const {
    if (!present(key)) return def;
    if (!j[key].is_boolean()) return bad(key, "must be true or false, got " + j[key].dump());
    return j[key].get<bool>();
  }
  Result<std::vector<int>> layers(const char* key, int num_layers) const {
    std::vector<int> out;
    if (!present(key)) return out;
    const json& v = j[key];
    if (!v.is_array()) return bad(key, "must be a list of layer indices, got " + v.dump());
    for (const auto& x : v) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= num_layers)
        return bad(key, "entry " + x.dump() + " is not a layer index in [0, num_hidden_layers = " +
                            std::to_string(num_layers) + ")");
      out.push_back(x.get<int>());
    }
    return out;
  }
};

}  // namespace

bool MoeConfig::is_moe_layer(int layer) const {
  if (layer < first_k_dense_replace) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end()) return false;
  return (layer + 1) % decoder_sparse_step == 0;
}

bool MoeConfig::has_dense_layers(int num_layers) const {
  for (int l = 0; l < num_layers; ++l)
    if (!is_moe_layer(l)) return true;
  return false;
}

Result<std::optional<MoeConfig>> parse_moe_config(const json& j, const std::string& path,
                                                  const std::string& architecture, int num_layers) {
  const Keys k{j, path};
  MoeConfig m;
  if (architecture == "Qwen3MoeForCausalLM" || architecture == "Qwen2MoeForCausalLM") {
    const bool q2 = architecture == "Qwen2MoeForCausalLM";
    // transformers 5.17 writes Qwen3-MoE's expert count as num_local_experts; earlier ones num_experts.
    SPK_ASSIGN(m.num_experts, k.integer("num_local_experts", q2 ? 60 : 128));
    SPK_ASSIGN(m.num_experts, k.integer("num_experts", m.num_experts));
    if (k.present("num_experts") && k.present("num_local_experts") &&
        j["num_experts"] != j["num_local_experts"])
      return k.bad("num_experts", "(" + j["num_experts"].dump() + ") disagrees with num_local_experts (" +
                                      j["num_local_experts"].dump() + ")");
    SPK_ASSIGN(m.top_k, k.integer("num_experts_per_tok", q2 ? 4 : 8));
    SPK_ASSIGN(m.moe_intermediate_size, k.integer("moe_intermediate_size", q2 ? 1408 : 768));
    SPK_ASSIGN(m.norm_topk_prob, k.boolean("norm_topk_prob", false));
    SPK_ASSIGN(m.decoder_sparse_step, k.integer("decoder_sparse_step", 1));
    SPK_ASSIGN(m.mlp_only_layers, k.layers("mlp_only_layers", num_layers));
    if (q2) {
      SPK_ASSIGN(m.shared_expert_intermediate_size, k.integer("shared_expert_intermediate_size", 5632));
      m.shared_expert_gated = true;
    }
  } else if (architecture == "MixtralForCausalLM") {
    m.naming = MoeNaming::mixtral;
    SPK_ASSIGN(m.num_experts, k.integer("num_local_experts", 8));
    SPK_ASSIGN(m.top_k, k.integer("num_experts_per_tok", 2));
    if (!k.present("intermediate_size")) return k.bad("intermediate_size", "is missing");
    SPK_ASSIGN(m.moe_intermediate_size, k.integer("intermediate_size", 14336));
    m.norm_topk_prob = true;  // softmax over the selected logits = softmax over all, renormalised
  } else if (architecture == "DeepseekV3ForCausalLM") {
    // DeepseekV3Config: sigmoid scores, selection bias, grouped top-k, shared experts of
    // n_shared_experts x moe_intermediate_size, the first first_k_dense_replace layers dense.
    SPK_ASSIGN(m.num_experts, k.integer("n_routed_experts", 256));
    SPK_ASSIGN(m.top_k, k.integer("num_experts_per_tok", 8));
    SPK_ASSIGN(m.moe_intermediate_size, k.integer("moe_intermediate_size", 2048));
    SPK_ASSIGN(m.n_group, k.integer("n_group", 8));
    SPK_ASSIGN(m.topk_group, k.integer("topk_group", 4));
    SPK_ASSIGN(m.norm_topk_prob, k.boolean("norm_topk_prob", true));
    SPK_ASSIGN(m.first_k_dense_replace, k.integer("first_k_dense_replace", 3, 0));
    SPK_ASSIGN(int shared, k.integer("n_shared_experts", 1, 0));
    m.routed_scaling_factor = 2.5;
    if (k.present("routed_scaling_factor")) {
      const json& v = j["routed_scaling_factor"];
      if (!v.is_number() || !(v.get<double>() > 0))
        return k.bad("routed_scaling_factor", "must be a number > 0, got " + v.dump());
      m.routed_scaling_factor = v.get<double>();
    }
    m.score = MoeScore::sigmoid;
    m.score_correction_bias = true;
    m.shared_expert_intermediate_size = shared * m.moe_intermediate_size;
    m.shared_expert_name = "shared_experts";
  } else {
    return std::optional<MoeConfig>{};
  }
  if (m.top_k > m.num_experts)
    return k.bad("num_experts_per_tok", "(" + std::to_string(m.top_k) + ") exceeds the number of experts (" +
                                            std::to_string(m.num_experts) + ")");
  return std::optional<MoeConfig>(std::move(m));
}

}  // namespace spk::rt
