#include <cuda_runtime.h>

#include <string>

#include "kernels/base/status.h"

namespace spk::cuda {

Result<uint64_t> total_device_memory(int device) {
  int n = 0;
  if (cudaError_t e = cudaGetDeviceCount(&n); e != cudaSuccess || n == 0)
    return make_error(
        std::string("no CUDA device visible (") + (e == cudaSuccess ? "0 devices" : cudaGetErrorString(e)) +
            ")",
        "check nvidia-smi and CUDA_VISIBLE_DEVICES, or pass --device-memory-gib with --backend cpu");
  if (device < 0 || device >= n)
    return make_error(
        "CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(n) + " visible)",
        "pick a device below " + std::to_string(n));
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(device);
  size_t free_b = 0, total_b = 0;
  cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
  cudaSetDevice(prev);
  if (e != cudaSuccess)
    return make_error(std::string("cudaMemGetInfo failed: ") + cudaGetErrorString(e),
                      "pass --device-memory-gib to skip the query");
  return static_cast<uint64_t>(total_b);
}

}  // namespace spk::cuda
