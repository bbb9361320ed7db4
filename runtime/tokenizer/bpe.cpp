#include "runtime/tokenizer/bpe.h"

#include <queue>

#include "runtime/tokenizer/utf8.h"

namespace spk::rt {

bool BpeModel::init(const std::vector<std::string>& raw_vocab,
                    const std::vector<std::pair<std::string, std::string>>& merges, const BpeOptions& opt,
                    std::string* bad) {
  opt_ = opt;
  raw_to_id_.reserve(raw_vocab.size() * 2);
  for (size_t id = 0; id < raw_vocab.size(); ++id)
    if (!raw_vocab[id].empty()) raw_to_id_.emplace(raw_vocab[id], static_cast<int32_t>(id));
  static const char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    byte_id_[b] = raw_to_id(std::string(1, static_cast<char>(b)));
    const char tok[] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>'};
    byte_token_[b] = raw_to_id(std::string_view(tok, sizeof tok));
  }
  if (opt_.char_level) {
    for (const auto& [raw, id] : raw_to_id_) {
      if (raw.empty() || utf8::valid_sequence_length(raw, 0) != raw.size()) continue;
      uint32_t cp;
      utf8::decode(raw, 0, &cp);
      char_id_.emplace(cp, id);
    }
  }
  merges_.reserve(merges.size() * 2);
  for (size_t r = 0; r < merges.size(); ++r) {
    int32_t a = raw_to_id(merges[r].first), b = raw_to_id(merges[r].second);
    int32_t m = raw_to_id(merges[r].first + merges[r].second);
    if (a < 0 || b < 0 || m < 0) {
      *bad = "merge #" + std::to_string(r) + " (" + merges[r].first + " " + merges[r].second + ")";
      return false;
    }
    // A repeated pair keeps its last rank, as the JS reference (a Map built in order) does.
    merges_.insert_or_assign(key(a, b), Merge{static_cast<uint32_t>(r), m});
  }
  return true;
}

int32_t BpeModel::raw_to_id(std::string_view raw) const {
  auto it = raw_to_id_.find(raw);
  return it == raw_to_id_.end() ? -1 : it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (opt_.ignore_merges) {
    int32_t id = raw_to_id(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() == 1 && !opt_.char_level) {
    int32_t id = byte_id_[static_cast<unsigned char>(word[0])];
    if (id >= 0 || opt_.unk_id >= 0) out.push_back(id >= 0 ? id : opt_.unk_id);
    return;
  }
  bool cacheable = word.size() < kCacheWordMax;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t first = out.size();
  merge_word(word, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.size() >= kCacheMax) cache_.clear();
    cache_.emplace(std::string(word), std::vector<int32_t>(out.begin() + first, out.end()));
  }
}

void BpeModel::initial_symbols(std::string_view word, std::vector<Sym>& sym) const {
  sym.clear();
  sym.reserve(word.size());
  size_t i = 0;
  while (i < word.size()) {
    int32_t id;
    size_t n;
    if (opt_.char_level) {
      n = utf8::valid_sequence_length(word, i);
      if (n == 0) n = 1;  // not reached for sanitized input; keeps the loop finite
      uint32_t cp = static_cast<unsigned char>(word[i]);
      if (n > 1) utf8::decode(word, i, &cp);
      auto it = char_id_.find(cp);
      id = it == char_id_.end() ? -1 : it->second;
    } else {
      n = 1;
      id = byte_id_[static_cast<unsigned char>(word[i])];
    }
    const auto k = static_cast<int32_t>(sym.size());
    sym.push_back({id, k - 1, -1, static_cast<uint32_t>(i), static_cast<uint32_t>(n)});
    if (k > 0) sym[k - 1].next = k;
    i += n;
  }
}

void BpeModel::emit_unknown(std::string_view bytes, bool& last_was_unk, std::vector<int32_t>& out) const {
  if (opt_.byte_fallback) {
    bool all = true;
    for (char c : bytes) all = all && byte_token_[static_cast<unsigned char>(c)] >= 0;
    if (all) {
      for (char c : bytes) out.push_back(byte_token_[static_cast<unsigned char>(c)]);
      last_was_unk = false;
      return;
    }
  }
  if (opt_.unk_id < 0) return;
  if (opt_.fuse_unk && last_was_unk) return;
  out.push_back(opt_.unk_id);
  last_was_unk = true;
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  std::vector<Sym> sym;
  initial_symbols(word, sym);
  const auto n = static_cast<int32_t>(sym.size());
  // Candidate merges: (rank, left position); stale entries are skipped when popped.
  using Cand = std::pair<uint64_t, int32_t>;  // rank << 32 | pos, pos
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int32_t left) {
    if (left < 0 || sym[left].next < 0) return;
    int32_t a = sym[left].id, b = sym[sym[left].next].id;
    if (a < 0 || b < 0) return;
    auto it = merges_.find(key(a, b));
    if (it != merges_.end()) heap.push({(uint64_t(it->second.rank) << 32) | uint32_t(left), left});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    auto [rk, left] = heap.top();
    heap.pop();
    Sym& l = sym[left];
    if (l.id == INT32_MIN || l.next < 0) continue;  // removed, or no right neighbour any more
    Sym& r = sym[l.next];
    auto it = merges_.find(key(l.id, r.id));
    if (it == merges_.end() || it->second.rank != (rk >> 32)) continue;  // stale pair
    l.id = it->second.id;
    l.len += r.len;
    int32_t right = l.next;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = left;
    sym[right].id = INT32_MIN;
    push(l.prev);
    push(left);
  }
  bool last_was_unk = false;
  for (int32_t i = 0; i >= 0 && i < n; i = sym[i].next) {
    if (sym[i].id >= 0) {
      out.push_back(sym[i].id);
      last_was_unk = false;
    } else {
      emit_unknown(word.substr(sym[i].begin, sym[i].len), last_was_unk, out);
    }
  }
}

}  // namespace spk::rt
