// A mixture-of-experts MLP layer (the `mlp` of a sparse decoder layer): router + routed SiLU-GLU experts +
// an optional shared expert, loaded from the Hugging Face layouts (one 2-D tensor per expert, or
// transformers 5's fused 3-D experts; see MoeNaming) and run through Backend::moe_ffn.
//
// Step: logits = x . [router; shared_expert_gate]^T (one linear) -> Backend::moe_route (fp32, on the
// backend: kernels/moe_route.h) -> per token the top_k (expert, weight) slots, plus one slot for the shared
// expert (weight 1, or sigmoid of its gate logit) -> moe_ffn -> delta. No host round trip, so on CUDA the
// whole layer sits inside the step's graph.
//
// Tensor parallelism: every expert (and the shared expert) is sharded along its intermediate dimension
// (gate/up rows, down columns: plan.moe_mlp / plan.shared_mlp); the router is replicated and every rank
// routes the same identical hidden state the same way, so each rank's moe_ffn is a partial sum of the full
// output and one all-reduce per layer completes it, as for the dense MLP.
#pragma once

#include <string>
#include <vector>

#include "runtime/model/layers.h"
#include "runtime/model/moe_router.h"

namespace spk::rt {

struct MoeMlp {
  MoeRouter router;
  Tensor gate_w;                       // [E (+1 with a gated shared expert), H] f32
  Tensor bias;                         // e_score_correction_bias [E] f32; empty() when none
  MoeRouteSpec spec;                   // the router's, plus the shared expert's slot
  std::vector<ExpertWeights> experts;  // routed 0..E-1, then the shared expert; this rank's slices
  bool shared = false, shared_gated = false;
  dist::Communicator* comm = nullptr;

  // `layer` is the decoder layer index; c.moe must be set. Errors name the tensor, the expected and
  // the found shape, or the expert that the config does not account for.
  Status load(Backend& be, const WeightSource& src, int layer, const ModelConfig& c, const TpContext& tp);
  // a.h -> a.delta (summed over ranks). Uses a.router_logits, a.moe_ids, a.moe_w.
  Status forward(Backend& be, Activations& a) const;
  [[nodiscard]] uint64_t bytes() const;
  [[nodiscard]] int slots() const { return router.top_k() + (shared ? 1 : 0); }  // moe_ids columns
  [[nodiscard]] int logit_rows() const { return router.num_experts() + (shared_gated ? 1 : 0); }
};

}  // namespace spk::rt
