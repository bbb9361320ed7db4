#include "runtime/serve/response_store.h"

namespace spk::rt {

size_t ResponseStore::cost(const std::string& id, const StoredResponse& r) {
  const std::string conv =
      r.conversation.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return id.size() + r.response_text.size() + conv.size() + 64;  // + the entry's own bookkeeping
}

void ResponseStore::erase_locked(std::unordered_map<std::string, Entry>::iterator it) {
  bytes_ -= it->second.bytes;
  order_.erase(it->second.pos);
  map_.erase(it);
}

bool ResponseStore::put(const std::string& id, StoredResponse r) {
  const size_t n = cost(id, r);  // outside the lock: it serialises the conversation
  auto value = std::make_shared<const StoredResponse>(std::move(r));
  std::lock_guard<std::mutex> lk(mu_);
  if (auto it = map_.find(id); it != map_.end()) erase_locked(it);
  if (n > max_bytes_) {
    ++refused_;
    return false;
  }
  order_.push_front(id);
  map_.emplace(id, Entry{std::move(value), n, order_.begin()});
  bytes_ += n;
  while (map_.size() > capacity_ || bytes_ > max_bytes_) {
    erase_locked(map_.find(order_.back()));
    ++evicted_;
  }
  return true;
}

std::shared_ptr<const StoredResponse> ResponseStore::get(const std::string& id) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = map_.find(id);
  if (it == map_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second.pos);  // iterators stay valid
  return it->second.value;
}

size_t ResponseStore::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  return map_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard<std::mutex> lk(mu_);
  return bytes_;
}

ResponseStoreStats ResponseStore::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return {map_.size(), bytes_, capacity_, max_bytes_, evicted_, refused_};
}

}  // namespace spk::rt
