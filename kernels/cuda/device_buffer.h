// RAII device allocation (cudaMalloc; never managed memory) with typed upload/download helpers.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace spk::cuda {

template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() { reset(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = o.p_;
      n_ = o.n_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  Status alloc(size_t n) {
    reset();
    if (n == 0) return ok_status();
    SPK_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
    n_ = n;
    return ok_status();
  }
  Status upload(const std::vector<T>& host) {
    if (host.size() != n_) SPK_TRY(alloc(host.size()));
    if (n_) SPK_CUDA_CHECK(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice));
    return ok_status();
  }
  Status download(std::vector<T>& host) const {
    host.resize(n_);
    if (n_) SPK_CUDA_CHECK(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost));
    return ok_status();
  }
  void reset() {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = 0;
  }
  T* get() const { return p_; }
  size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

// True when a CUDA device is usable; `why` says what failed otherwise.
inline bool cuda_device_available(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    if (why) *why = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device";
    return false;
  }
  return true;
}

}  // namespace spk::cuda
