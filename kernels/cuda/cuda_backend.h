// The CUDA backend (internal header; users go through kernels/backend.h make_backend("cuda")).
// bf16 weights, fp32 activations (the residual stream tracks the fp32 CPU reference), bf16 paged KV.
// Ops are queued and flushed at sync points (upload, download, begin_step, synchronize) through a
// GraphQueue, so repeated decode steps replay as CUDA graphs.
#pragma once

#include <memory>

#include "kernels/backend.h"

namespace spk::cuda {

// Error when no device is usable (names the CUDA error and the fix).
Result<std::unique_ptr<Backend>> make_cuda_backend();

}  // namespace spk::cuda
