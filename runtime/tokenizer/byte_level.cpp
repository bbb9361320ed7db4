#include "runtime/tokenizer/byte_level.h"

#include <array>

#include "runtime/tokenizer/utf8.h"

namespace spk::rt::byte_level {
namespace {

struct Tables {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 0x144> to_byte{};
  Tables() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      bool keep = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = keep ? static_cast<uint32_t>(b) : next++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t byte_to_cp(uint8_t b) { return tables().to_cp[b]; }

int cp_to_byte(uint32_t cp) { return cp < 0x144 ? tables().to_byte[cp] : -1; }

bool decode(std::string_view piece, std::string* raw) {
  raw->clear();
  if (!utf8::is_valid(piece)) return false;
  for (size_t i = 0; i < piece.size();) {
    uint32_t cp;
    i += utf8::decode(piece, i, &cp);
    int b = cp_to_byte(cp);
    if (b < 0) return false;
    *raw += static_cast<char>(b);
  }
  return true;
}

std::string encode(std::string_view raw) {
  std::string out;
  for (char c : raw) utf8::append(out, byte_to_cp(static_cast<uint8_t>(c)));
  return out;
}

}  // namespace spk::rt::byte_level
