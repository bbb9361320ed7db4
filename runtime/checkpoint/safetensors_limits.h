// Caps on untrusted safetensors/index input (internal to runtime/checkpoint).
#pragma once

#include <cstddef>
#include <cstdint>

namespace spk::rt {

inline constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // 100 MB, as the reference implementation
inline constexpr int kMaxHeaderDepth = 4;                  // valid headers have depth 3
inline constexpr size_t kMaxTensors = 1u << 20;            // 8B models have ~300 tensors
inline constexpr size_t kMaxTensorRank = 8;
inline constexpr uint64_t kMaxIndexBytes = 64ull << 20;  // model.safetensors.index.json

}  // namespace spk::rt
