// Non-finite weights (NaN, +-Inf) in a checkpoint: counted once at load on the mmapped (CPU) bytes of
// every floating-point tensor (F32, F16, BF16), so that a corrupt or badly converted checkpoint is
// reported by name instead of generating garbage without a word. Integer tensors are not scanned.
//
// Cost: one read of the weights, tensors spread over up to 16 threads, branch-free (a value is non-finite iff
// its exponent bits are all ones: 4 bf16/f16 or 2 f32 values per 64-bit word, an add and a popcount). The
// bytes are read from the page cache that the load itself fills, so the scan costs ~memory bandwidth, not
// disk time twice (figure in tests/checkpoint/nonfinite_test.cpp's bench and the commit message).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/base/status.h"
#include "kernels/dtype.h"
#include "runtime/checkpoint/checkpoint.h"

namespace spk::rt {

// Non-finite values among `numel` elements of `dtype` at `data` (any alignment); 0 for integer dtypes.
uint64_t count_nonfinite(const void* data, DType dtype, uint64_t numel);

struct NonFiniteReport {
  uint64_t values = 0;         // non-finite values in all tensors
  uint64_t tensors = 0;        // tensors holding at least one
  std::string first_tensor;    // the first such tensor in name order; "" when none
  uint64_t first_values = 0;   // its count
  uint64_t bytes_scanned = 0;  // floating-point tensor bytes read
  double seconds = 0;
  [[nodiscard]] bool clean() const { return values == 0; }
  // "checkpoint <dir>: 3 non-finite (NaN/Inf) weight values in 1 tensor(s), first 'x' (3)"
  [[nodiscard]] std::string describe(const std::string& dir) const;
};

// Tensors are scanned on up to 16 threads; the report does not depend on their number.
NonFiniteReport scan_nonfinite(const Checkpoint& c);

// What to do with a checkpoint that holds non-finite weights.
enum class NonFinitePolicy { warn, refuse };

// The scan plus the policy: a warning line on stderr (spdlog) naming the count and the first tensor,
// or (refuse) an error naming them and the fix. Clean checkpoints print nothing.
Status check_nonfinite(const Checkpoint& c, NonFinitePolicy policy);

}  // namespace spk::rt
