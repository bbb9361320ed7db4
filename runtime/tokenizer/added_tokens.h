// Internal: splitting text on added tokens (special and not), before the pre-tokenizer.
// Semantics of @huggingface/tokenizers' DictionarySplitter: scan left to right; at each position
// take the longest added token that starts there; text between matches is one section.
// lstrip / rstrip trim the whitespace of the neighbouring text sections (JS trimEnd/trimStart).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spk::rt {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;  // accepted, not applied (the JS reference ignores it too)
  bool normalized = false;
};

struct Section {
  std::string_view text;
  int32_t id = -1;  // the added token's id, or -1 for plain text
};

class AddedTokenSplitter {
 public:
  AddedTokenSplitter() = default;
  explicit AddedTokenSplitter(std::vector<AddedToken> tokens);
  [[nodiscard]] bool empty() const { return tokens_.empty(); }
  // Sections in order; plain sections may be empty after stripping (callers skip them).
  [[nodiscard]] std::vector<Section> split(std::string_view text) const;

 private:
  std::vector<AddedToken> tokens_;
  std::vector<std::vector<uint32_t>> by_first_byte_;  // indices into tokens_, longest first
};

// JS String.prototype.trimStart / trimEnd whitespace (WhiteSpace + LineTerminator).
std::string_view js_trim_start(std::string_view s);
std::string_view js_trim_end(std::string_view s);

}  // namespace spk::rt
