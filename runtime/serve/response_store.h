// The responses kept for previous_response_id and GET /v1/responses/{id}: a bounded in-memory LRU (the
// oldest untouched entry goes first), safe across handler threads. Lost on restart, like any cache.
#pragma once

#include <list>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>

namespace spk::rt {

struct StoredResponse {
  nlohmann::json response;              // the response object as answered
  nlohmann::ordered_json conversation;  // chat-form messages: the whole history, the answer included
};

class ResponseStore {
 public:
  explicit ResponseStore(size_t capacity = 256) : capacity_(capacity == 0 ? 1 : capacity) {}

  void put(const std::string& id, StoredResponse r);
  // A copy (the entry may be evicted by another thread right after); a hit counts as a use.
  [[nodiscard]] std::optional<StoredResponse> get(const std::string& id) const;
  [[nodiscard]] size_t size() const;
  [[nodiscard]] size_t capacity() const { return capacity_; }

 private:
  using Order = std::list<std::string>;
  struct Entry {
    StoredResponse value;
    Order::iterator pos;
  };
  size_t capacity_;
  mutable std::mutex mu_;
  mutable Order order_;  // most recently used first
  std::unordered_map<std::string, Entry> map_;
};

}  // namespace spk::rt
