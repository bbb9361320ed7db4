// Internal: the decoder of tokenizer.json, reduced to what the supported files need: the bytes each
// token contributes, plus two rules that look at the whole text.
//  - ByteLevel (GPT-2 lineage): a model token is its byte-level string mapped back to bytes; an added
//    token is its content verbatim.
//  - SentencePiece lineage, a Sequence (or a single step) of
//      Replace (String pattern -> content, e.g. "▁" -> " ") and Metaspace ("▁" -> " "), per token;
//      ByteFallback: a token spelled <0xNN> is the byte NN (consecutive ones form UTF-8 together);
//      Fuse: tokens are joined (decode joins them anyway);
//      Strip (content, start, stop) after Fuse: drop up to `start` leading / `stop` trailing `content`.
//    The Metaspace decoder also drops the leading " " of the first token (as @huggingface/tokenizers
//    does, whatever the prepend_scheme).
// Per-token bytes concatenate to the decode because a byte-fallback run decoded alone (WHATWG rules:
// each maximal invalid subpart -> U+FFFD) equals the same bytes decoded in place: a normal token is
// valid UTF-8 and starts on a character boundary, so it never completes a run's truncated tail.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernels/base/status.h"

namespace spk::rt {

class TokenDecoder {
 public:
  // `config` is tokenizer.json's "decoder". Unsupported types or orders are errors naming them.
  static Result<TokenDecoder> from_json(const nlohmann::json& config, const std::string& origin);

  [[nodiscard]] bool byte_level() const { return byte_level_; }
  // The bytes `piece` (a token string as tokenizer.json spells it) contributes; `added`: an added token.
  // `lead_space` (optional): the token's text before byte fallback starts with " " (the Metaspace rule).
  [[nodiscard]] std::string token_bytes(const std::string& piece, bool added,
                                        bool* lead_space = nullptr) const;
  // Whole-text rules: `text` is the concatenated, UTF-8-sanitized decode; `first_lead_space`: the first
  // decoded token had a leading " " (see token_bytes).
  [[nodiscard]] std::string finish(std::string text, bool first_lead_space) const;
  // True when decode() may differ from the plain concatenation of token_bytes (a streaming decoder that
  // continues a prompt keeps the concatenation, as vLLM's detokenizer does).
  [[nodiscard]] bool strips_start() const { return metaspace_first_ || strip_start_ > 0; }

 private:
  static Status add_steps(const nlohmann::json& c, const std::string& origin, TokenDecoder& d, int& phase);

  bool byte_level_ = false;
  std::vector<std::pair<std::string, std::string>> replace_;  // per token, in order
  bool byte_fallback_ = false;
  bool metaspace_first_ = false;  // Metaspace decoder: strip the first token's leading " "
  std::string strip_content_;     // Strip after Fuse
  int strip_start_ = 0, strip_stop_ = 0;
};

}  // namespace spk::rt
