#include "runtime/chat/js_string.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "runtime/tokenizer/utf8.h"

namespace spk::rt::jinja {

char32_t utf8_next(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int n = b0 >= 0xF0 ? 3 : b0 >= 0xE0 ? 2 : b0 >= 0xC0 ? 1 : -1;
  if (n < 0 || i + static_cast<size_t>(n) >= s.size()) {
    ++i;
    return 0xFFFD;
  }
  char32_t cp = b0 & (0x3F >> n);
  for (int k = 1; k <= n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  i += n + 1;
  return cp;
}

void utf8_append(std::string& out, char32_t cp) { utf8::append(out, static_cast<uint32_t>(cp)); }

bool js_is_space(char32_t c) {
  return c == 0x09 || c == 0x0A || c == 0x0B || c == 0x0C || c == 0x0D || c == 0x20 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

size_t js_space_run_forward(std::string_view s, size_t pos) {
  size_t i = pos;
  while (i < s.size()) {
    size_t j = i;
    if (!js_is_space(utf8_next(s, j))) break;
    i = j;
  }
  return i - pos;
}

size_t js_space_run_backward(std::string_view s, size_t end) {
  size_t i = end;
  while (i > 0) {
    size_t start = i - 1;  // back up to the lead byte of the previous code point
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && i - start < 4) --start;
    size_t j = start;
    const char32_t cp = utf8_next(s, j);
    if (j != i || !js_is_space(cp)) break;
    i = start;
  }
  return end - i;
}

std::string js_trim_start(std::string_view s) { return std::string(s.substr(js_space_run_forward(s, 0))); }
std::string js_trim_end(std::string_view s) {
  return std::string(s.substr(0, s.size() - js_space_run_backward(s, s.size())));
}
std::string js_trim(std::string_view s) {
  const size_t a = js_space_run_forward(s, 0);
  if (a == s.size()) return {};
  const size_t b = js_space_run_backward(s, s.size());
  return std::string(s.substr(a, s.size() - a - b));
}

size_t js_length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) n += utf8_next(s, i) >= 0x10000 ? 2 : 1;
  return n;
}

std::vector<std::string> js_code_points(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const size_t a = i;
    utf8_next(s, i);
    out.emplace_back(s.substr(a, i - a));
  }
  return out;
}

std::string ascii_upper(std::string_view s) {
  std::string r(s);
  for (char& c : r)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  return r;
}
std::string ascii_lower(std::string_view s) {
  std::string r(s);
  for (char& c : r)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return r;
}

namespace {
struct CaseTables {
  std::unordered_map<char32_t, std::u32string> upper, lower;
};

std::u32string parse_cps(const std::string& field) {
  std::u32string out;
  std::istringstream is(field);
  std::string hex;
  while (is >> hex) out += static_cast<char32_t>(std::stoul(hex, nullptr, 16));
  return out;
}

const CaseTables& case_tables() {
  static const CaseTables tables = [] {
    CaseTables t;
    std::ifstream data("/usr/share/unicode/UnicodeData.txt");
    for (std::string line; std::getline(data, line);) {
      std::vector<std::string> f;
      std::string cur;
      for (char ch : line) {
        if (ch == ';') {
          f.push_back(cur);
          cur.clear();
        } else {
          cur += ch;
        }
      }
      f.push_back(cur);
      if (f.size() < 14) continue;
      const char32_t cp = static_cast<char32_t>(std::stoul(f[0], nullptr, 16));
      if (!f[12].empty()) t.upper[cp] = parse_cps(f[12]);
      if (!f[13].empty()) t.lower[cp] = parse_cps(f[13]);
    }
    // Unconditional full mappings (e.g. U+00DF -> "SS"); lines with a condition field are skipped.
    std::ifstream special("/usr/share/unicode/SpecialCasing.txt");
    for (std::string line; std::getline(special, line);) {
      line = line.substr(0, line.find('#'));
      std::vector<std::string> f;
      size_t start = 0;
      for (size_t p; (p = line.find(';', start)) != std::string::npos; start = p + 1)
        f.push_back(line.substr(start, p - start));
      if (f.size() != 4) continue;  // code; lower; title; upper;  (a 5th field is a condition)
      const char32_t cp = static_cast<char32_t>(std::stoul(f[0], nullptr, 16));
      t.lower[cp] = parse_cps(f[1]);
      t.upper[cp] = parse_cps(f[3]);
    }
    return t;
  }();
  return tables;
}

std::string map_case(std::string_view s, bool upper, bool first_only) {
  std::string out;
  out.reserve(s.size());
  bool done = false;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (done) {
      out.append(s.substr(i));
      break;
    }
    done = first_only;
    if (b < 0x80) {
      char c = static_cast<char>(b);
      if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
      if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
      out += c;
      ++i;
      continue;
    }
    const size_t a = i;
    const char32_t cp = utf8_next(s, i);
    const auto& table = upper ? case_tables().upper : case_tables().lower;
    auto it = table.find(cp);
    if (it == table.end()) {
      out.append(s.substr(a, i - a));
    } else {
      for (char32_t m : it->second) utf8_append(out, m);
    }
  }
  return out;
}
}  // namespace

std::string js_upper(std::string_view s) { return map_case(s, true, false); }
std::string js_lower(std::string_view s) { return map_case(s, false, false); }
std::string js_upper_first(std::string_view s) { return map_case(s, true, true); }

// ECMA-262 Number::toString: shortest round-trip digits, then fixed or exponent layout by exponent.
std::string js_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return "0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, std::fabs(v), std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  const int exp10 = std::stoi(sci.substr(e + 1));
  const int k = static_cast<int>(digits.size());
  const int n = exp10 + 1;  // value = 0.digits * 10^n
  std::string out = v < 0 ? "-" : "";
  if (k <= n && n <= 21) {
    out += digits + std::string(n - k, '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, n) + "." + digits.substr(n);
  } else if (-6 < n && n <= 0) {
    out += "0." + std::string(-n, '0') + digits;
  } else {
    out += digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += (n - 1 >= 0 ? "e+" : "e-") + std::to_string(std::abs(n - 1));
  }
  return out;
}

std::string js_json_quote(std::string_view s, bool ascii) {
  std::string out = "\"";
  char hex[16];
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      switch (c) {
        case '"':
          out += "\\\"";
          break;
        case '\\':
          out += "\\\\";
          break;
        case '\b':
          out += "\\b";
          break;
        case '\f':
          out += "\\f";
          break;
        case '\n':
          out += "\\n";
          break;
        case '\r':
          out += "\\r";
          break;
        case '\t':
          out += "\\t";
          break;
        default:
          if (c < 0x20 || (ascii && c == 0x7f)) {
            std::snprintf(hex, sizeof hex, "\\u%04x", c);
            out += hex;
          } else {
            out += static_cast<char>(c);
          }
      }
      continue;
    }
    const size_t a = i;
    char32_t cp = utf8_next(s, i);
    if (!ascii) {
      out.append(s.substr(a, i - a));
    } else if (cp >= 0x10000) {
      cp -= 0x10000;
      std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned>(0xD800 + (cp >> 10)));
      out += hex;
      std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned>(0xDC00 + (cp & 0x3FF)));
      out += hex;
    } else {
      std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned>(cp));
      out += hex;
    }
  }
  return out + "\"";
}

}  // namespace spk::rt::jinja
