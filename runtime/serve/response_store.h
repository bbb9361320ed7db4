// The responses kept for previous_response_id and GET /v1/responses/{id}: a bounded in-memory LRU (the
// oldest untouched entry goes first), safe across handler threads. Lost on restart, like any cache.
//
// Bounded twice: by count (`capacity`) and by bytes (`max_bytes`, each entry's serialised size: the
// response text as GET sends it, the conversation as JSON text). The response is kept serialised, once,
// on the handler thread that stored it: a response echoes the request's `tools` even when none is used
// (tool_choice "none"), and 130,000 small tools parsed are ~20x their text in memory. An entry larger
// than the whole budget is not kept (put() says so); the others evict the least recently used.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

namespace spk::rt {

struct StoredResponse {
  std::string response_text;            // the response object as answered, serialised (sent as is)
  nlohmann::ordered_json conversation;  // chat-form messages: the whole history, the answer included
};

struct ResponseStoreStats {
  size_t entries = 0;
  size_t bytes = 0;
  size_t max_entries = 0;
  size_t max_bytes = 0;
  uint64_t evicted = 0;  // entries dropped to make room (count or bytes)
  uint64_t refused = 0;  // responses not kept: larger than the whole byte budget alone
};

class ResponseStore {
 public:
  static constexpr size_t kDefaultMaxBytes = 256u << 20;
  explicit ResponseStore(size_t capacity = 256, size_t max_bytes = kDefaultMaxBytes)
      : capacity_(capacity == 0 ? 1 : capacity), max_bytes_(max_bytes == 0 ? 1 : max_bytes) {}

  // false: not kept (the entry alone exceeds the byte budget); an older entry of the same id is dropped.
  bool put(const std::string& id, StoredResponse r);
  // Shared, not copied (a GET of a large response costs no copy under the lock); the entry may be evicted
  // by another thread right after, the pointer stays valid. A hit counts as a use.
  [[nodiscard]] std::shared_ptr<const StoredResponse> get(const std::string& id) const;
  [[nodiscard]] size_t size() const;
  [[nodiscard]] size_t bytes() const;
  [[nodiscard]] size_t capacity() const { return capacity_; }
  [[nodiscard]] size_t max_bytes() const { return max_bytes_; }
  [[nodiscard]] ResponseStoreStats stats() const;
  // What an entry counts against the budget.
  [[nodiscard]] static size_t cost(const std::string& id, const StoredResponse& r);

 private:
  using Order = std::list<std::string>;
  struct Entry {
    std::shared_ptr<const StoredResponse> value;
    size_t bytes = 0;
    Order::iterator pos;
  };
  void erase_locked(std::unordered_map<std::string, Entry>::iterator it);
  size_t capacity_;
  size_t max_bytes_;
  mutable std::mutex mu_;
  mutable Order order_;  // most recently used first
  std::unordered_map<std::string, Entry> map_;
  size_t bytes_ = 0;
  uint64_t evicted_ = 0, refused_ = 0;
};

}  // namespace spk::rt
