// The backend seam's tensor: a backend-owned handle (data pointer + dtype + shape + device), row-major
// and contiguous. `storage` keeps the bytes alive (an allocation of the backend, or the mmapped
// checkpoint the bytes live in); copies and views share it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/dtype.h"

namespace spk {

enum class Device : uint8_t { cpu, cuda };

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  Device device = Device::cpu;
  std::shared_ptr<void> storage;

  [[nodiscard]] int64_t numel() const;
  [[nodiscard]] size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  [[nodiscard]] int rank() const { return static_cast<int>(shape.size()); }
  // dim(-1) is the last dimension.
  [[nodiscard]] int64_t dim(int i) const { return shape[i < 0 ? shape.size() + i : i]; }
  [[nodiscard]] bool empty() const { return data == nullptr; }
  template <class T>
  [[nodiscard]] T* ptr() const {
    return static_cast<T*>(data);
  }
  // Same bytes, another shape (numel must match; asserted).
  [[nodiscard]] Tensor reshape(std::vector<int64_t> new_shape) const;
  // Rows [begin, begin+count) of dim 0, sharing storage.
  [[nodiscard]] Tensor rows(int64_t begin, int64_t count) const;
};

// "[3, 64] bf16" for error messages.
std::string describe(const Tensor& t);

}  // namespace spk
