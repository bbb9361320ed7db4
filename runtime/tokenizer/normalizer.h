// Internal: the normalizer of tokenizer.json, applied to each text section between added tokens
// before pre-tokenization. Supported steps (what the Llama 3 / Qwen / Llama 2 / Mistral / Gemma files
// use): NFC, Prepend (SentencePiece's dummy prefix "▁"), Replace (String or Regex pattern -> content,
// e.g. " " -> "▁"), and Sequence of these. Any other type is an error that names it.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/base/status.h"
#include "runtime/tokenizer/regex_split.h"

namespace spk::rt {

class Normalizer {
 public:
  // `config` is tokenizer.json's "normalizer" (null: no normalizer). `origin` names the file in errors.
  static Result<Normalizer> from_json(const nlohmann::json& config, const std::string& origin);

  // True when tokenizer.json has a normalizer at all (even an empty Sequence): the reference then
  // splits normalized added tokens after normalization.
  [[nodiscard]] bool present() const { return present_; }
  // Normalized text; `text` must be valid UTF-8.
  [[nodiscard]] Result<std::string> apply(std::string_view text) const;

 private:
  enum class Kind { kNfc, kPrepend, kReplace };
  struct Step {
    Kind kind = Kind::kNfc;
    std::string literal;                 // Prepend text, or Replace's String pattern
    std::shared_ptr<const Regex> regex;  // Replace's Regex pattern
    std::string content;                 // Replace's replacement
  };
  static Status add_steps(const nlohmann::json& c, const std::string& origin, std::vector<Step>& steps);

  std::vector<Step> steps_;
  bool present_ = false;
};

// Every occurrence of `from` (non-empty) in `s` replaced by `to`, left to right.
std::string replace_all(std::string_view s, std::string_view from, std::string_view to);

}  // namespace spk::rt
