// The one check macro of the CUDA layer: converts a failing cudaError_t / cublasStatus_t into an
// spk::Error naming the call, the file:line and the CUDA error string.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/base/status.h"

namespace spk::cuda {

inline Error cuda_error(cudaError_t e, const char* what, const char* file, int line) {
  return make_error(
      std::string(what) + " failed at " + file + ":" + std::to_string(line) + ": " + cudaGetErrorString(e),
      e == cudaErrorMemoryAllocation ? "lower gpu_memory_utilization or max_model_len" : "");
}

inline Error cublas_error(cublasStatus_t s, const char* what, const char* file, int line) {
  return make_error(std::string(what) + " failed at " + file + ":" + std::to_string(line) +
                    ": cublas status " + std::to_string(static_cast<int>(s)));
}

}  // namespace spk::cuda

#define SPK_CUDA_CHECK(expr)                                                    \
  do {                                                                          \
    cudaError_t spk_cuda_err_ = (expr);                                         \
    if (spk_cuda_err_ != cudaSuccess)                                           \
      return ::spk::cuda::cuda_error(spk_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define SPK_CUBLAS_CHECK(expr)                                                     \
  do {                                                                             \
    cublasStatus_t spk_cublas_st_ = (expr);                                        \
    if (spk_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                   \
      return ::spk::cuda::cublas_error(spk_cublas_st_, #expr, __FILE__, __LINE__); \
  } while (0)

// After a kernel launch: the launch error (bad config) is reported here; execution errors surface
// at the next synchronising call.
#define SPK_CUDA_LAUNCH_CHECK() SPK_CUDA_CHECK(cudaGetLastError())
