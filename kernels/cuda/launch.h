// Kernel launches with programmatic dependent launch (PDL, sm_90+).
//
// A decode step is ~300-400 short kernels in one graph; at batch 1 most of them are a few microseconds
// long, and every boundary costs the next kernel's launch and ramp-up while the previous one drains.
// With PDL a kernel may be scheduled as soon as every block of the previous one has started: it issues
// the loads that do not depend on its predecessor (the GEMV's weights) and then waits in
// `pdl_wait()` until the predecessor has completed and its writes are visible.
//
// The rule every kernel launched here follows: before `pdl_wait()` it reads only memory that no kernel
// of the step writes (weights) and writes nothing. Since every kernel waits, completion is transitive:
// a kernel that passed its wait sees the writes of all the kernels before it.
//
// SPARKCTL_PDL=0 launches without the attribute (the waits then return at once).
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace spk::cuda {

// Waits until the previous kernel in the stream has completed and flushed its writes.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel be scheduled once every block of this one has executed it (or exited).
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// The prologue of a kernel with nothing to load before its inputs are ready: wait for the previous
// kernel, then let the next one be scheduled (at most two kernels of the step are in flight).
__device__ __forceinline__ void pdl_begin() {
  pdl_wait();
  pdl_launch_dependents();
}

// Whether launches carry the PDL attribute: the device is sm_90+ and SPARKCTL_PDL is not "0".
bool pdl_enabled();

// kernel<<<grid, block, smem, s>>>(args...), with the PDL attribute when enabled. Returns the launch error.
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                          Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_enabled() ? 1 : 0;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

}  // namespace spk::cuda

// Launch + check, inside a function returning Status.
#define SPK_LAUNCH(kernel, grid, block, smem, stream, ...) \
  SPK_CUDA_CHECK(::spk::cuda::launch_kernel(kernel, grid, block, smem, stream, __VA_ARGS__))
