#include "kernels/tensor.h"

#include <cassert>

namespace spk {

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Tensor Tensor::reshape(std::vector<int64_t> new_shape) const {
  Tensor t = *this;
  t.shape = std::move(new_shape);
  assert(t.numel() == numel());
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t count) const {
  assert(!shape.empty() && begin >= 0 && begin + count <= shape[0]);
  Tensor t = *this;
  const size_t row_bytes = shape[0] == 0 ? 0 : nbytes() / static_cast<size_t>(shape[0]);
  t.data = static_cast<uint8_t*>(data) + static_cast<size_t>(begin) * row_bytes;
  t.shape[0] = count;
  return t;
}

std::string describe(const Tensor& t) {
  std::string s = "[";
  for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  return s + "] " + std::string(dtype_name(t.dtype));
}

}  // namespace spk
