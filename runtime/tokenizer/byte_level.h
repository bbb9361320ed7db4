// Internal: GPT-2 byte-level alphabet. Every byte maps to one printable code point (bytes
// '!'..'~', 0xA1..0xAC, 0xAE..0xFF map to themselves, the other 68 to U+0100..U+0143), so BPE
// vocabularies are strings over that alphabet. We run BPE on raw bytes and convert only at load.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace spk::rt::byte_level {

// Code point of byte b.
uint32_t byte_to_cp(uint8_t b);
// Byte of code point cp, or -1 when cp is not in the alphabet.
int cp_to_byte(uint32_t cp);
// Byte-level string (UTF-8) -> raw bytes; false when a code point is outside the alphabet.
bool decode(std::string_view piece, std::string* raw);
// Raw bytes -> byte-level string (UTF-8), as tokenizer.json spells tokens.
std::string encode(std::string_view raw);

}  // namespace spk::rt::byte_level
