#include "runtime/serve/response_store.h"

namespace spk::rt {

void ResponseStore::put(const std::string& id, StoredResponse r) {
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = map_.find(id); it != map_.end()) {
    order_.erase(it->second.pos);
    map_.erase(it);
  }
  order_.push_front(id);
  map_.emplace(id, Entry{std::move(r), order_.begin()});
  while (map_.size() > capacity_) {
    map_.erase(order_.back());
    order_.pop_back();
  }
}

std::optional<StoredResponse> ResponseStore::get(const std::string& id) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = map_.find(id);
  if (it == map_.end()) return std::nullopt;
  order_.splice(order_.begin(), order_, it->second.pos);  // iterators stay valid
  return it->second.value;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return map_.size();
}

}  // namespace spk::rt
