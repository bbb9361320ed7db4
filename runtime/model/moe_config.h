// The mixture-of-experts facts of a config.json (kept apart from model_config so the dense parser stays
// small). Every family's keys map onto one MoeConfig; the router and the MoE layer read only this.
// Defaults are those of transformers' config class for the family (Qwen3MoeConfig, Qwen2MoeConfig,
// MixtralConfig). Which layers are sparse (transformers' rule): layer l is MoE iff
// l >= first_k_dense_replace, l is not in mlp_only_layers and (l + 1) % decoder_sparse_step == 0.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernels/base/status.h"
#include "kernels/moe_route.h"

namespace spk::rt {

using spk::MoeScore;  // router score over all routed experts, in fp32 (kernels/moe_route.h)

// Where a family keeps a MoE layer's tensors under model.layers.<l>:
//   qwen:    mlp.gate.weight [E, H]; mlp.experts.<e>.{gate,up,down}_proj.weight
//   mixtral: block_sparse_moe.gate.weight; block_sparse_moe.experts.<e>.{w1,w3,w2}.weight (gate, up, down)
// Either may instead hold transformers 5's fused experts: mlp.experts.gate_up_proj [E, 2I, H] (gate rows
// first) and mlp.experts.down_proj [E, H, I] (mixtral: under mlp., with the router at mlp.gate.weight).
enum class MoeNaming { qwen, mixtral };

struct MoeConfig {
  int num_experts = 0;            // routed experts (num_experts / num_local_experts / n_routed_experts)
  int top_k = 0;                  // num_experts_per_tok
  int moe_intermediate_size = 0;  // width of each routed expert
  MoeScore score = MoeScore::softmax;
  bool norm_topk_prob = false;  // renormalise the selected weights to sum 1 (Mixtral: always)
  double routed_scaling_factor = 1.0;
  int n_group = 1, topk_group = 1;     // grouped top-k: keep the topk_group best groups (sum of top-2)
  bool score_correction_bias = false;  // mlp.gate.e_score_correction_bias [E], selection only
  // Shared experts: run on every token, added to the routed sum (gated: times
  // sigmoid(mlp.shared_expert_gate(x)), as Qwen2-MoE).
  int shared_expert_intermediate_size = 0;  // 0 = none
  bool shared_expert_gated = false;
  std::string shared_expert_name = "shared_expert";  // under mlp.
  MoeNaming naming = MoeNaming::qwen;
  int first_k_dense_replace = 0;
  int decoder_sparse_step = 1;
  std::vector<int> mlp_only_layers;

  [[nodiscard]] bool is_moe_layer(int layer) const;
  [[nodiscard]] bool has_dense_layers(int num_layers) const;
};

// `architecture` is config.json's architectures[0]. Dense architectures give nullopt. Errors name the
// key, the bad value and the file.
Result<std::optional<MoeConfig>> parse_moe_config(const nlohmann::json& text_config, const std::string& path,
                                                  const std::string& architecture, int num_hidden_layers);

}  // namespace spk::rt
