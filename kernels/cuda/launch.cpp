#include "kernels/cuda/launch.h"

#include <cstdlib>
#include <cstring>

#include "kernels/knobs.h"

namespace spk::cuda {

bool pdl_enabled() {
  // One device per process (the runtime pins its rank's GPU before the first launch).
  static const bool on = [] {
    if (knob(Knob::PDL) == 0) return false;
    int dev = 0, major = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
    return major >= 9;
  }();
  return on;
}

}  // namespace spk::cuda
