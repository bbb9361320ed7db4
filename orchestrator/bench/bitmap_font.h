// A 5x7 bitmap font for the plot's labels: digits, '.', '/', '-', '(', ')', ' ', and the lowercase
// letters the labels use (a c d e g k m n o p r s t u x y). Anything else draws as an empty box, so a
// missing glyph is visible rather than silently dropped.
#pragma once

#include <array>
#include <cstdint>

namespace spk {

inline constexpr int kGlyphW = 5, kGlyphH = 7;

// Row bits of `c`, top row first; bit 4 is the leftmost column.
std::array<uint8_t, kGlyphH> glyph_rows(char c);

}  // namespace spk
