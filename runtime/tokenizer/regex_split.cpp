#include "runtime/tokenizer/regex_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdio>
#include <vector>

#include "runtime/tokenizer/unicode_tables.h"

namespace spk::rt {
namespace {

// Unicode White_Space, the set both Oniguruma's and the JS translation's \s match.
constexpr const char* kWhiteSpace =
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
    "\\x{205F}\\x{3000}";

bool ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char other_case(char c) {
  return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 32) : static_cast<char>(c + 32);
}

size_t char_len(std::string_view s, size_t i) {
  auto b = static_cast<unsigned char>(s[i]);
  size_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  return std::min(n, s.size() - i);
}

struct MatchState {
  pcre2_match_data* md = nullptr;
  pcre2_match_context* mctx = nullptr;
  pcre2_jit_stack* stack = nullptr;
  MatchState() {
    md = pcre2_match_data_create(1, nullptr);
    mctx = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);  // long runs need depth
    pcre2_jit_stack_assign(mctx, nullptr, stack);
  }
  ~MatchState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(mctx);
    pcre2_match_data_free(md);
  }
};

MatchState& match_state() {
  thread_local MatchState st;
  return st;
}

// Unicode version of the linked PCRE2 as major * 100 + minor (Debian 12's 10.42: 1400).
int pcre2_unicode_version() {
  static const int v = [] {
    char buf[32] = {};
    pcre2_config(PCRE2_CONFIG_UNICODE_VERSION, buf);
    int major = 0, minor = 0;
    std::sscanf(buf, "%d.%d", &major, &minor);
    return major * 100 + minor;
  }();
  return v;
}

// Ranges (class body syntax) of code points of general category `prop` ("L", "So", ...) that the
// Unicode Character Database we build from assigns but the linked PCRE2 does not know yet; the
// JS reference (newer Unicode) classifies them, so we add them to the \p{...} they belong to.
std::string newer_ranges(std::string_view prop) {
  if (prop.empty() || prop.size() > 2) return {};
  std::string out;
  const int have = pcre2_unicode_version();
  for (size_t i = 0; i < unicode_tables::kAgedCount; ++i) {
    const auto& r = unicode_tables::kAged[i];
    if (r.age <= have || r.gc[0] != prop[0] || (prop.size() == 2 && r.gc[1] != prop[1])) continue;
    char buf[48];
    std::snprintf(buf, sizeof buf, "\\x{%X}-\\x{%X}", r.first, r.last);
    out += buf;
  }
  return out;
}

}  // namespace

std::string oniguruma_to_pcre2(std::string_view re) {
  std::string out;
  bool in_class = false;
  bool fold = false;
  std::vector<bool> groups;
  for (size_t i = 0; i < re.size();) {
    char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      char d = re[i + 1];
      if (d == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (d == 'S') {
        out += in_class ? std::string("\\S") : "[^" + std::string(kWhiteSpace) + "]";
      } else if (d == 'd') {
        out += "\\p{Nd}";
      } else if (d == 'D') {
        out += "\\P{Nd}";
      } else if ((d == 'p' || d == 'P') && i + 2 < re.size() && re[i + 2] == '{') {
        size_t close = re.find('}', i);
        if (close == std::string_view::npos) close = re.size() - 1;
        std::string_view whole = re.substr(i, close + 1 - i);
        std::string extra = newer_ranges(re.substr(i + 3, close > i + 3 ? close - i - 3 : 0));
        if (extra.empty() || (d == 'P' && in_class)) {  // (\P inside a class: left as PCRE2 knows it)
          out.append(whole);
        } else if (in_class) {
          out.append(whole).append(extra);
        } else {
          out.append(d == 'p' ? "[" : "[^").append("\\p").append(whole.substr(2)).append(extra).append("]");
        }
        i = close + 1;
        continue;
      } else {
        out += '\\';
        out.append(re.substr(i + 1, char_len(re, i + 1)));
        i += 1 + char_len(re, i + 1);
        continue;
      }
      i += 2;
      continue;
    }
    if (in_class) {
      if (c == ']') in_class = false;
      if (fold && ascii_letter(c)) {
        out += c;
        out += other_case(c);
        ++i;
        continue;
      }
      out.append(re.substr(i, char_len(re, i)));
      i += char_len(re, i);
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += '[';
      ++i;
      if (i < re.size() && re[i] == '^') out += re[i++];
      if (i < re.size() && re[i] == ']') {  // a leading ']' is a literal
        out += "\\]";
        ++i;
      }
      continue;
    }
    if (c == '(') {
      groups.push_back(fold);
      if (re.substr(i, 4) == "(?i:") {
        fold = true;
        out += "(?:";
        i += 4;
        continue;
      }
      out += '(';
      ++i;
      continue;
    }
    if (c == ')') {
      if (!groups.empty()) {
        fold = groups.back();
        groups.pop_back();
      }
      out += ')';
      ++i;
      continue;
    }
    if (c == '.') {
      out += "[^\\n]";
      ++i;
      continue;
    }
    if (fold && ascii_letter(c)) {
      out += '[';
      out += c;
      out += other_case(c);
      out += ']';
      ++i;
      continue;
    }
    out.append(re.substr(i, char_len(re, i)));
    i += char_len(re, i);
  }
  return out;
}

Result<std::shared_ptr<const Regex>> Regex::compile(const std::string& pattern) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
  if (!code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return make_error("tokenizer: pre-tokenizer regex does not compile at offset " + std::to_string(off) +
                          ": " + reinterpret_cast<const char*>(msg) + " (pattern " + pattern + ")",
                      "check the Split pattern in tokenizer.json");
  }
  std::shared_ptr<Regex> r(new Regex());
  r->pattern_ = pattern;
  r->code_ = code;
  r->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return std::shared_ptr<const Regex>(std::move(r));
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

Result<bool> Regex::match_at(std::string_view text, size_t start, size_t* b, size_t* e) const {
  MatchState& st = match_state();
  auto* code = static_cast<pcre2_code*>(code_);
  auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = jit_ ? pcre2_jit_match(code, subject, text.size(), start, 0, st.md, st.mctx)
                : pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, st.md, st.mctx);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0 && rc != 0) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    return make_error(std::string("tokenizer: regex match failed: ") + reinterpret_cast<const char*>(msg),
                      "report the input that triggers it");
  }
  PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.md);
  *b = ov[0];
  *e = ov[1];
  return true;
}

}  // namespace spk::rt
