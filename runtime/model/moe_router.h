// The mixture-of-experts router of a config: MoeRouter::make checks the MoE keys of config.json against
// each other (naming them) and yields the spec that Backend::moe_route runs; the math itself, its fp32
// reference and its exact semantics live in kernels/moe_route.h. The shared expert is the layer's business
// (moe.h adds it to the spec).
#pragma once

#include <cstdint>

#include "kernels/base/status.h"
#include "kernels/moe_route.h"
#include "runtime/model/moe_config.h"

namespace spk::rt {

class MoeRouter {
 public:
  // Refuses group settings that do not fit the expert count, naming the keys.
  static Result<MoeRouter> make(const MoeConfig& c);

  [[nodiscard]] int num_experts() const { return spec_.num_experts; }
  [[nodiscard]] int top_k() const { return spec_.top_k; }
  // The routed experts only (shared = false).
  [[nodiscard]] const MoeRouteSpec& spec() const { return spec_; }

  // logits [n, num_experts] fp32 row-major; bias [num_experts] or nullptr. Writes ids [n, top_k] and
  // weights [n, top_k] (row-major): the fp32 reference, moe_route_reference.
  void route(const float* logits, int64_t n, const float* bias, int32_t* ids, float* weights) const {
    moe_route_reference(spec_, logits, n, bias, ids, weights);
  }

 private:
  MoeRouteSpec spec_;
};

}  // namespace spk::rt
