// Tokenizer from a Hugging Face `tokenizer.json`: BPE of both lineages, byte-level (Llama 3, Qwen,
// DeepSeek, gpt-oss: pre-tokenizer regex on PCRE2, NFC where configured) and SentencePiece-style
// (Llama 2, Mistral v0.x, Gemma: "▁" normalizers or the Metaspace pre-tokenizer, <0xNN> byte
// fallback), with added/special tokens and the decoder chain of the file.
// Target: id-for-id parity with @huggingface/tokenizers on the real tokenizers in scripts/npm.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/base/status.h"

namespace spk::rt {

class Tokenizer {
 public:
  // `path` is a tokenizer.json file or a directory holding one.
  static Result<std::shared_ptr<Tokenizer>> load(const std::string& path);
  virtual ~Tokenizer() = default;

  // add_special_tokens: apply the post-processor (e.g. Llama 3's leading <|begin_of_text|>).
  [[nodiscard]] virtual std::vector<int32_t> encode(std::string_view text, bool add_special_tokens) const = 0;
  [[nodiscard]] virtual std::string decode(const std::vector<int32_t>& ids,
                                           bool skip_special_tokens) const = 0;
  // -1 when unknown.
  [[nodiscard]] virtual int32_t token_to_id(std::string_view token) const = 0;
  [[nodiscard]] virtual std::string id_to_token(int32_t id) const = 0;
  // Highest id + 1, added tokens included.
  [[nodiscard]] virtual size_t vocab_size() const = 0;
  [[nodiscard]] virtual bool is_special(int32_t id) const = 0;
};

// Streaming detokenizer: feed ids one at a time, get the newly completed UTF-8 text (holds back bytes
// of an incomplete multi-byte character until it completes, also across SentencePiece <0xNN> byte
// tokens). The concatenation of all chunks equals decode(all ids) except for
//  - the clean_up_tokenization_spaces rewrite (" ." -> "."), which streaming never applies (it needs
//    lookahead; Llama 3.1's tokenizer_config turns it on for decode());
//  - the leading " " of a SentencePiece text, which decode() strips (Strip / Metaspace decoders) and
//    the stream keeps: generated ids continue a prompt ("The capital is" + "▁Paris" -> " Paris"), as
//    vLLM's incremental detokenizer gives them.
class IncrementalDecoder {
 public:
  IncrementalDecoder(std::shared_ptr<const Tokenizer> tok, bool skip_special_tokens);
  std::string push(int32_t id);
  std::string finish();  // whatever is left (invalid bytes as U+FFFD)

 private:
  std::shared_ptr<const Tokenizer> tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;  // ids since the last point where every byte was returned
  size_t emitted_ = 0;        // bytes of the raw decode of ids_ already returned
};

}  // namespace spk::rt
