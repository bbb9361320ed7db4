// Internal: UTF-8 helpers of the runtime (tokenizer, chat templates). Decoding of invalid input follows the WHATWG
// TextDecoder (fatal: false) rule that @huggingface/tokenizers inherits: each maximal invalid
// subpart becomes one U+FFFD.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace spk::rt::utf8 {

// Length of the valid sequence starting at s[i], or 0 when s[i..] does not start one (invalid or
// truncated). `prefix` (optional) receives how many bytes form a valid-so-far prefix.
size_t valid_sequence_length(std::string_view s, size_t i, size_t* prefix = nullptr);

// Decode one code point from valid UTF-8 at s[i]; returns its byte length.
inline size_t decode(std::string_view s, size_t i, uint32_t* cp) {
  auto b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) {
    *cp = b;
    return 1;
  }
  if (b < 0xE0) {
    *cp = ((b & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu);
    return 2;
  }
  if (b < 0xF0) {
    *cp = ((b & 0x0Fu) << 12) | ((s[i + 1] & 0x3Fu) << 6) | (s[i + 2] & 0x3Fu);
    return 3;
  }
  *cp = ((b & 0x07u) << 18) | ((s[i + 1] & 0x3Fu) << 12) | ((s[i + 2] & 0x3Fu) << 6) | (s[i + 3] & 0x3Fu);
  return 4;
}

void append(std::string& out, uint32_t cp);

bool is_valid(std::string_view s);

// Valid UTF-8 with every maximal invalid subpart replaced by U+FFFD (WHATWG decoder).
std::string sanitize(std::string_view s);

// Bytes at the end of `s` that are a valid but incomplete sequence (0..3): a streaming decoder
// holds these back until the next bytes arrive.
size_t incomplete_tail(std::string_view s);

}  // namespace spk::rt::utf8
