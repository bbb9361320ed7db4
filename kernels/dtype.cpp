#include "kernels/dtype.h"

#include <cmath>

namespace spk {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::f16:
      return "F16";
    case DType::bf16:
      return "BF16";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
    case DType::u8:
      return "U8";
  }
  return "?";
}

std::optional<DType> parse_dtype(std::string_view s) {
  if (s == "F32") return DType::f32;
  if (s == "F16") return DType::f16;
  if (s == "BF16") return DType::bf16;
  if (s == "I32") return DType::i32;
  if (s == "I64") return DType::i64;
  if (s == "U8") return DType::u8;
  return std::nullopt;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  float out;
  if (exp == 0) {
    out = std::ldexp(static_cast<float>(mant), -24);  // zero or subnormal
    return sign ? -out : out;
  }
  uint32_t u;
  if (exp == 31)
    u = sign | 0x7f800000u | (mant << 13);  // inf / nan
  else
    u = sign | ((exp + 112u) << 23) | (mant << 13);
  std::memcpy(&out, &u, 4);
  return out;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7e00u;
  if (a >= 65520.0f) return sign | 0x7c00u;  // overflow -> inf
  if (a < 6.103515625e-05f) {                // subnormal half
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  uint32_t au;
  std::memcpy(&au, &a, 4);
  uint32_t mant = au & 0x7fffffu;
  uint32_t exp = (au >> 23) - 112u;
  uint32_t h = (exp << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // round to nearest even
  return sign | static_cast<uint16_t>(h);
}

}  // namespace spk
