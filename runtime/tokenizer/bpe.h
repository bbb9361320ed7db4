// Internal: the BPE model of tokenizer.json, in two symbol modes.
//  - Byte-level (GPT-2 lineage): symbols start as one per input byte; the vocabulary was converted
//    from the byte-level alphabet to raw bytes at load.
//  - Character-level (SentencePiece lineage: Llama 2, Mistral v0.x, Gemma): symbols start as one per
//    code point. A code point that is not in the vocabulary becomes its UTF-8 bytes as <0xNN> tokens
//    when `byte_fallback` is on and all of them exist, else the unk token (consecutive unks of one word
//    fused into one when `fuse_unk`), else nothing.
// Merges are a hash map (left id, right id) -> (rank, merged id), applied lowest rank first and leftmost
// among equal ranks (same order as @huggingface/tokenizers' heap with positional tie-break and as Rust
// `tokenizers`). A per-word cache holds the ids of recently seen pre-tokens.
// Napkin: a 1 MB corpus is ~250k pre-tokens, most of them cache hits after the first few KB; a word
// with no pre-tokenizer (Llama 2: a whole text section) is O(n log n) in its code points.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace spk::rt {

// Transparent string hash: lookups by string_view without building a std::string.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

struct BpeOptions {
  bool char_level = false;     // SentencePiece lineage: initial symbols are code points
  bool byte_fallback = false;  // unknown code point -> <0xNN> tokens (char_level only)
  bool fuse_unk = false;       // consecutive unknowns of one word -> one unk
  bool ignore_merges = false;  // a word that is a vocabulary token is that token
  int32_t unk_id = -1;         // -1: unknown symbols are dropped
};

class BpeModel {
 public:
  // raw_vocab: id -> raw bytes of the token ("" for ids that are not model tokens).
  // merges: (left raw, right raw) in rank order. Fails (returns false, *bad set) on a merge whose
  // parts or result are not in the vocabulary.
  bool init(const std::vector<std::string>& raw_vocab,
            const std::vector<std::pair<std::string, std::string>>& merges, const BpeOptions& opt,
            std::string* bad);

  // Appends the ids of one pre-token (raw bytes; valid UTF-8 in char-level mode).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // -1 when absent.
  [[nodiscard]] int32_t raw_to_id(std::string_view raw) const;
  // Id of the <0xNN> token of byte b, -1 when absent (char-level mode).
  [[nodiscard]] int32_t byte_token(uint8_t b) const { return byte_token_[b]; }

 private:
  struct Merge {
    uint32_t rank;
    int32_t id;
  };
  struct Sym {
    int32_t id;  // -1: not in the vocabulary; INT32_MIN: merged away
    int32_t prev, next;
    uint32_t begin, len;  // bytes of the word it covers (for byte fallback)
  };
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;
  void initial_symbols(std::string_view word, std::vector<Sym>& sym) const;
  void emit_unknown(std::string_view bytes, bool& last_was_unk, std::vector<int32_t>& out) const;

  StringMap<int32_t> raw_to_id_;
  std::unordered_map<uint64_t, Merge> merges_;
  std::unordered_map<uint32_t, int32_t> char_id_;  // code point -> id of that one-character token
  int32_t byte_id_[256];                           // byte-level: raw byte -> id
  int32_t byte_token_[256];                        // char-level: byte -> id of "<0xNN>"
  BpeOptions opt_;

  mutable std::mutex cache_mu_;
  mutable StringMap<std::vector<int32_t>> cache_;
  static constexpr size_t kCacheMax = 1 << 18;  // entries; cleared when full
  static constexpr size_t kCacheWordMax = 256;  // longer words are not cached
};

}  // namespace spk::rt
