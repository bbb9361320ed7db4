#include "kernels/device_memory.h"

namespace spk {

#ifdef SPARKCTL_HAVE_CUDA
namespace cuda {
Result<uint64_t> total_device_memory(int device);  // kernels/cuda/device_memory.cpp
}
#endif

Result<uint64_t> device_memory_bytes(const std::string& backend, int device) {
  if (backend == "cpu")
    return make_error("the cpu backend has no device memory to query",
                      "pass --device-memory-gib: the RAM budget the memory planner treats as device memory");
  if (backend == "cuda") {
#ifdef SPARKCTL_HAVE_CUDA
    return cuda::total_device_memory(device);
#else
    return make_error("backend cuda is not built into this sparkctl",
                      "use a build configured with the CUDA toolkit, or --backend cpu");
#endif
  }
  return make_error("unknown backend '" + backend + "'", "pass --backend cpu or cuda");
}

}  // namespace spk
