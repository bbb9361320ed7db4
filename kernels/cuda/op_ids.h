// The CUDA backend's op ids: the first word of every op's fingerprint (fingerprint.h), one list. A step
// replays as a CUDA graph only when every op's fingerprint (id + the arguments it launches with) repeats,
// so two kernels must never share an id.
#pragma once

#include <cstdint>

namespace spk::cuda {

#define SPK_CUDA_OPS(X)        \
  X(embedding, 1)              \
  X(rmsnorm, 2)                \
  X(linear, 3) /* GEMV */      \
  X(linear_gemm, 13)           \
  X(linear_w4a16, 11)          \
  X(rope, 4)                   \
  X(kv_write, 5)               \
  X(attention, 6) /* decode */ \
  X(attention_prefill, 12)     \
  X(silu_mul, 7)               \
  X(gather_rows, 8)            \
  X(upload, 9)                 \
  X(sample, 10)                \
  X(rope_and_cache, 45)        \
  X(attention_rope, 46)        \
  X(moe_ffn, 0x4D)             \
  X(moe_ffn_w4a16, 14)         \
  X(moe_route, 0x52)           \
  X(external, 0xE7)

enum class OpId : uint64_t {
#define SPK_OP_ENUM(name, value) name = value,
  SPK_CUDA_OPS(SPK_OP_ENUM)
#undef SPK_OP_ENUM
};

constexpr uint64_t op_id(OpId o) { return static_cast<uint64_t>(o); }

// The op's name for logs and traces.
constexpr const char* op_name(OpId o) {
  switch (o) {
#define SPK_OP_NAME(name, value) \
  case OpId::name:               \
    return #name;
    SPK_CUDA_OPS(SPK_OP_NAME)
#undef SPK_OP_NAME
  }
  return "?";
}

}  // namespace spk::cuda
