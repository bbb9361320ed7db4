// Internal: byte-level BPE model. Symbols are token ids from the start (one per input byte), merges
// are a hash map (left id, right id) -> (rank, merged id), applied lowest rank first and leftmost
// among equal ranks (same order as @huggingface/tokenizers' heap with positional tie-break and as
// Rust `tokenizers`). A per-word cache holds the ids of recently seen pre-tokens.
// Napkin: a 1 MB corpus is ~250k pre-tokens, most of them cache hits after the first few KB.
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

class BpeModel {
 public:
  // raw_vocab: id -> raw bytes of the token ("" for ids that are not byte-level model tokens).
  // merges: (left raw, right raw) in rank order. Fails (returns false, *bad set) on a merge whose
  // parts or result are not in the vocabulary.
  bool init(const std::vector<std::string>& raw_vocab,
            const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges,
            int32_t unk_id, std::string* bad);

  // Appends the ids of one pre-token (raw bytes).
  void encode_word(std::string_view word, std::vector<int32_t>& out) const;

  // -1 when absent.
  [[nodiscard]] int32_t raw_to_id(std::string_view raw) const;

 private:
  struct Merge {
    uint32_t rank;
    int32_t id;
  };
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  StringMap<int32_t> raw_to_id_;
  std::unordered_map<uint64_t, Merge> merges_;
  int32_t byte_id_[256];
  bool ignore_merges_ = false;
  int32_t unk_id_ = -1;

  mutable std::mutex cache_mu_;
  mutable StringMap<std::vector<int32_t>> cache_;
  static constexpr size_t kCacheMax = 1 << 18;  // entries; cleared when full
  static constexpr size_t kCacheWordMax = 256;  // longer words are not cached
};

}  // namespace spk::rt
