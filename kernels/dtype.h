// Element types of checkpoint tensors and their conversions to fp32 (the CPU backend's math type).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace spk {

enum class DType : uint8_t { f32, f16, bf16, i32, i64, u8 };

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
    case DType::i32:
      return 4;
    case DType::f16:
    case DType::bf16:
      return 2;
    case DType::i64:
      return 8;
    case DType::u8:
      return 1;
  }
  return 0;
}

// Safetensors spelling: "F32", "F16", "BF16", "I32", "I64", "U8".
std::string_view dtype_name(DType t);
std::optional<DType> parse_dtype(std::string_view safetensors_name);

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even, as torch does; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}  // namespace spk
