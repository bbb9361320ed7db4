// Internal: the Tokenizer implementation for Hugging Face BPE tokenizer.json files, both lineages:
// byte-level (Llama 3, Qwen, DeepSeek, gpt-oss) and SentencePiece-style with byte fallback (Llama 2,
// Mistral v0.x, Gemma). Pipeline per @huggingface/tokenizers (the parity reference):
//   split on added tokens whose `normalized` is false (or with no normalizer) -> normalize each text
//   section (NFC / Prepend / Replace / Sequence) -> split on the normalized added tokens -> pre-tokenize
//   (Split regexes, ByteLevel, Metaspace) -> BPE -> post-process (ByteLevel: nothing;
//   TemplateProcessing: e.g. Llama 3's or Llama 2's BOS).
// decode: ids -> bytes per token (decoder.h) -> UTF-8 with U+FFFD for invalid bytes -> the decoder's
// whole-text rules (SentencePiece: strip the leading " ") -> the clean_up_tokenization_spaces rewrite
// when tokenizer_config.json asks for it (Llama 3.1 does).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/tokenizer/added_tokens.h"
#include "runtime/tokenizer/bpe.h"
#include "runtime/tokenizer/decoder.h"
#include "runtime/tokenizer/normalizer.h"
#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/tokenizer.h"

namespace spk::rt {

class HfTokenizer final : public Tokenizer {
 public:
  // tokenizer.json text and tokenizer_config.json text ("" when absent). `origin` names the file in errors.
  static Result<std::shared_ptr<HfTokenizer>> from_json(const std::string& tokenizer_json,
                                                        const std::string& config_json,
                                                        const std::string& origin);

  [[nodiscard]] std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const override;
  [[nodiscard]] std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override;
  [[nodiscard]] int32_t token_to_id(std::string_view token) const override;
  [[nodiscard]] std::string id_to_token(int32_t id) const override;
  [[nodiscard]] size_t vocab_size() const override { return pieces_.size(); }
  [[nodiscard]] bool is_special(int32_t id) const override;

  // Raw bytes of the ids (special ones dropped when asked), not yet UTF-8 checked, without the
  // decoder's whole-text rules and clean-up: the streaming decoder works on this, so a stream that
  // continues a prompt keeps the leading " " of its first SentencePiece token (as vLLM does).
  [[nodiscard]] std::string decode_bytes(const std::vector<int32_t>& ids, bool skip_special_tokens) const;
  // Error-reporting variant of encode (encode() returns what it got up to a regex failure).
  Result<std::vector<int32_t>> try_encode(std::string_view text, bool add_special_tokens) const;
  [[nodiscard]] bool clean_up_tokenization_spaces() const { return clean_up_; }

 private:
  // from_json without the exception guard: a missing key or a wrong JSON type throws (json::at, get).
  static Result<std::shared_ptr<HfTokenizer>> from_json_unguarded(const std::string& tokenizer_json,
                                                                  const std::string& config_json,
                                                                  const std::string& origin);
  Status encode_text(std::string_view text, std::vector<int32_t>& out) const;

  std::vector<std::string> pieces_;  // id -> token string as in tokenizer.json (added: content)
  std::vector<std::string> bytes_;   // id -> raw bytes for decode
  std::vector<uint8_t> flags_;       // id -> kAdded | kSpecial | kSkip | kLeadSpace
  StringMap<int32_t> piece_to_id_;
  BpeModel bpe_;
  PreTokenizer pre_;
  Normalizer normalizer_;
  TokenDecoder decoder_;
  AddedTokenSplitter split_raw_, split_normalized_;
  std::vector<int32_t> prefix_ids_, suffix_ids_;  // TemplateProcessing "single" around sequence A
  bool clean_up_ = false;

  static constexpr uint8_t kAdded = 1, kSpecial = 2, kSkip = 4, kLeadSpace = 8;
};

}  // namespace spk::rt
