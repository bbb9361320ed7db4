#include "runtime/tokenizer/bpe.h"

#include <queue>

namespace spk::rt {

bool BpeModel::init(const std::vector<std::string>& raw_vocab,
                    const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges,
                    int32_t unk_id, std::string* bad) {
  ignore_merges_ = ignore_merges;
  unk_id_ = unk_id;
  raw_to_id_.reserve(raw_vocab.size() * 2);
  for (size_t id = 0; id < raw_vocab.size(); ++id)
    if (!raw_vocab[id].empty()) raw_to_id_.emplace(raw_vocab[id], static_cast<int32_t>(id));
  for (int b = 0; b < 256; ++b) byte_id_[b] = raw_to_id(std::string(1, static_cast<char>(b)));
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
  if (ignore_merges_) {
    int32_t id = raw_to_id(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() == 1) {
    int32_t id = byte_id_[static_cast<unsigned char>(word[0])];
    if (id >= 0 || unk_id_ >= 0) out.push_back(id >= 0 ? id : unk_id_);
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

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Sym {
    int32_t id;
    int32_t prev, next;
  };
  const int n = static_cast<int>(word.size());
  std::vector<Sym> sym(n);
  for (int i = 0; i < n; ++i)
    sym[i] = {byte_id_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};
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
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    auto [rk, left] = heap.top();
    heap.pop();
    Sym& l = sym[left];
    if (l.id == INT32_MIN || l.next < 0) continue;  // removed, or no right neighbour any more
    Sym& r = sym[l.next];
    auto it = merges_.find(key(l.id, r.id));
    if (it == merges_.end() || it->second.rank != (rk >> 32)) continue;  // stale pair
    l.id = it->second.id;
    int32_t right = l.next;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = left;
    sym[right].id = INT32_MIN;
    push(l.prev);
    push(left);
  }
  for (int i = 0; i >= 0; i = sym[i].next) {
    int32_t id = sym[i].id;
    if (id >= 0)
      out.push_back(id);
    else if (unk_id_ >= 0)
      out.push_back(unk_id_);
  }
}

}  // namespace spk::rt
