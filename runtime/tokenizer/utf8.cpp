#include "runtime/tokenizer/utf8.h"

namespace spk::rt::utf8 {

size_t valid_sequence_length(std::string_view s, size_t i, size_t* prefix) {
  auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char b = at(i);
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b < 0x80) {
    if (prefix) *prefix = 1;
    return 1;
  } else if (b >= 0xC2 && b <= 0xDF) {
    need = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 3;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 4;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    if (prefix) *prefix = 0;
    return 0;
  }
  size_t k = 1;
  for (; k < need && i + k < s.size(); ++k) {
    unsigned char c = at(i + k);
    if (k == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) break;
  }
  if (prefix) *prefix = k;
  return k == need ? need : 0;
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t n = valid_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t prefix = 0;
    size_t n = valid_sequence_length(s, i, &prefix);
    if (n) {
      out.append(s.data() + i, n);
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += prefix ? prefix : 1;
    }
  }
  return out;
}

size_t incomplete_tail(std::string_view s) {
  // A sequence is at most 4 bytes, so only a lead byte within the last 3 can start an incomplete one.
  for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
    size_t i = s.size() - back;
    auto b = static_cast<unsigned char>(s[i]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    size_t prefix = 0;
    size_t n = valid_sequence_length(s, i, &prefix);
    return (n == 0 && prefix == back) ? back : 0;
  }
  return 0;
}

}  // namespace spk::rt::utf8
