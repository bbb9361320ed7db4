// Internal: NFC tables generated at build time from the Unicode Character Database
// (gen/unicode_tables_gen.cpp, wired by unicode_tables.cmake). All arrays are sorted by key.
#pragma once

#include <cstddef>
#include <cstdint>

namespace spk::rt::unicode_tables {

struct Ccc {
  uint32_t cp;
  uint8_t ccc;  // canonical combining class, non-zero entries only
};
struct Decomp {
  uint32_t cp;
  uint32_t first;
  uint32_t second;  // 0 for singleton decompositions
};
struct Comp {
  uint64_t pair;  // first << 21 | second
  uint32_t composite;
};

// Code points assigned since Unicode 11.0 (DerivedAge.txt) with their general category.
struct AgedRange {
  uint32_t first, last;
  char gc[3];    // "Lo", "So", ...
  uint16_t age;  // major * 100 + minor, e.g. 1500
};

extern const Ccc kCcc[];
extern const size_t kCccCount;
extern const Decomp kDecomp[];
extern const size_t kDecompCount;
extern const Comp kComp[];
extern const size_t kCompCount;
extern const AgedRange kAged[];
extern const size_t kAgedCount;

}  // namespace spk::rt::unicode_tables
