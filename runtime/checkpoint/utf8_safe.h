// Error text built from untrusted bytes (a parser's "last read" excerpt) must stay valid UTF-8: it is
// printed as JSON by `--json` verbs, and a JSON serializer refuses ill-formed UTF-8. Internal header.
#pragma once

#include <string>
#include <string_view>

namespace spk::rt {

// `s` with each byte that is not part of a well-formed UTF-8 sequence written as "\xNN".
inline std::string utf8_safe(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    bool ok = len != 0 && i + len <= s.size();
    unsigned cp = len == 2 ? c & 0x1F : len == 3 ? c & 0x0F : c & 0x07;
    for (size_t k = 1; ok && k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      ok = (d & 0xC0) == 0x80;
      cp = (cp << 6) | (d & 0x3F);
    }
    if (ok && len > 1) {
      const unsigned min = len == 2 ? 0x80 : len == 3 ? 0x800 : 0x10000;
      ok = cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    }
    if (!ok) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}

}  // namespace spk::rt
