// Internal: the pre-tokenizer regexes of tokenizer.json on PCRE2 (UTF + UCP, JIT).
// tokenizer.json patterns are written for Oniguruma (Rust `tokenizers`); @huggingface/tokenizers
// translates them for JavaScript, and we translate them the same way for PCRE2 so that both agree:
//   \s / \S   -> Unicode White_Space (includes U+0085, which PCRE2's \s lacks)
//   \d / \D   -> \p{Nd} / \P{Nd};  .  -> [^\n]
//   (?i:...)  -> ASCII-only case folding of letters ([sS]), like the JS translation
//   \p{X}     -> plus the code points of category X that our Unicode Character Database assigns
//               but the linked PCRE2's older Unicode does not (Debian 12: PCRE2 Unicode 14 vs UCD 15)
// Matching follows JS String.matchAll: after an empty match the search resumes one code point on.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "kernels/base/status.h"

namespace spk::rt {

// Oniguruma pattern (as in tokenizer.json) -> PCRE2 pattern.
std::string oniguruma_to_pcre2(std::string_view pattern);

class Regex {
 public:
  // `pcre2_pattern` is compiled as is (use oniguruma_to_pcre2 first for tokenizer.json patterns).
  static Result<std::shared_ptr<const Regex>> compile(const std::string& pcre2_pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls on_match(begin, end) for every match in `text` (valid UTF-8), left to right.
  // Thread-safe (per-thread match data). Returns an error only on a PCRE2 matching failure.
  template <class F>
  Status for_each_match(std::string_view text, F&& on_match) const {
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t b = 0, e = 0;
      SPK_ASSIGN(bool found, match_at(text, pos, &b, &e));
      if (!found) break;
      on_match(b, e);
      if (e > b) {
        pos = e;
      } else {  // empty match: step one code point, as JS does with the `u` flag
        if (e >= text.size()) break;
        pos = e + 1;
        while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
      }
    }
    return ok_status();
  }

  [[nodiscard]] const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  Result<bool> match_at(std::string_view text, size_t start, size_t* b, size_t* e) const;

  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
};

}  // namespace spk::rt
