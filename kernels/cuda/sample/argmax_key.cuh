// Order-preserving keys for argmax by atomicMax: larger float, larger key; ties go to the lowest id.
// Shared by the lm_head GEMV (which folds a greedy argmax into its epilogue) and the sampler (which reads
// it).
#pragma once

#include <cstdint>

namespace spk::cuda {

// Monotonic map float -> uint32 (larger float, larger key).
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t u = __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float key_value(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// The sampler's rule for logits: NaN counts as -inf.
__device__ __forceinline__ float nan_as_neg_inf(float v) { return isnan(v) ? -INFINITY : v; }

// (value, id) as one 64-bit key, NaN as -inf; of equal values the lowest id has the largest key. Never 0,
// which marks an empty slot.
__device__ __forceinline__ unsigned long long argmax_key(float v, int id) {
  return (static_cast<unsigned long long>(order_key(nan_as_neg_inf(v))) << 32) |
         (0xffffffffu - static_cast<uint32_t>(id));
}
__device__ __forceinline__ int argmax_key_id(unsigned long long k) {
  return static_cast<int>(0xffffffffu - static_cast<uint32_t>(k));
}

}  // namespace spk::cuda
