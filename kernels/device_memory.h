// How much memory the runtime's device has: the "device memory" the memory planner multiplies by
// gpu_memory_utilization (vLLM's convention: the device's total, not what is free now).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/base/status.h"

namespace spk {

// backend "cuda": total memory of CUDA device `device` (cudaMemGetInfo; on GB10's unified memory this
// is the memory the GPU may address). backend "cpu": an error, since a CPU "device" is a RAM budget
// that only the operator can choose (--device-memory-gib). Errors name the backend and the fix.
Result<uint64_t> device_memory_bytes(const std::string& backend, int device = 0);

}  // namespace spk
