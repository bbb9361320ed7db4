// Mixture-of-experts routing on the device (Backend::moe_route; spec and fp32 reference in
// kernels/moe_route.h): one warp per token holds the token's scores in shared memory, reduces the softmax
// with shuffles, picks the topk_group groups and then the top_k experts by k rounds of a warp argmax (ties
// to the lower index, as the reference), and writes the slots moe_ffn reads, so a MoE layer needs no host
// round trip and stays inside the step's CUDA graph. A few microseconds a layer; no weights are read.
#pragma once

#include "kernels/cuda/cuda_ops.h"
#include "kernels/moe_route.h"

namespace spk::cuda {

constexpr int kMoeRouteMaxExperts = 1024;  // shared memory per warp: 2 x 4 B per expert
constexpr int kMoeRouteMaxGroups = 32;     // one group per lane

// Whether the kernel covers this spec (else the caller routes on the host).
bool moe_route_supported(const MoeRouteSpec& spec);

// logits [n, spec.logit_cols()] f32; bias [num_experts] f32 or null; ids, w [n, spec.slots()].
Status moe_route(const MoeRouteSpec& spec, const float* logits, int n, const float* bias, int32_t* ids,
                 float* w, cudaStream_t s);

}  // namespace spk::cuda
