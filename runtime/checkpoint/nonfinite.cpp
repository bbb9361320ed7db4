#include "runtime/checkpoint/nonfinite.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace spk::rt {

namespace {

// Lanes of `mask` bits per 64-bit word: a lane is non-finite iff (lane & mask) == mask. Adding the
// mask's lowest bit to (word & mask) carries into the lane's top bit exactly then, and never across
// lanes (the lane's top bit, the sign, is outside the mask).
template <uint64_t Mask, uint64_t Low, uint64_t Top>
uint64_t count_words(const uint8_t* p, uint64_t words) {
  uint64_t n = 0;
  for (uint64_t i = 0; i < words; ++i) {
    uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    n += static_cast<uint64_t>(std::popcount(((w & Mask) + Low) & Top));
  }
  return n;
}

template <typename U, U Mask>
uint64_t count_tail(const uint8_t* p, uint64_t n) {
  uint64_t c = 0;
  for (uint64_t i = 0; i < n; ++i) {
    U v;
    std::memcpy(&v, p + sizeof(U) * i, sizeof(U));
    c += (v & Mask) == Mask;
  }
  return c;
}

}  // namespace

uint64_t count_nonfinite(const void* data, DType dtype, uint64_t numel) {
  const auto* p = static_cast<const uint8_t*>(data);
  switch (dtype) {
    case DType::bf16: {
      const uint64_t words = numel / 4;
      return count_words<0x7F807F807F807F80ull, 0x0080008000800080ull, 0x8000800080008000ull>(p, words) +
             count_tail<uint16_t, 0x7F80>(p + 8 * words, numel % 4);
    }
    case DType::f16: {
      const uint64_t words = numel / 4;
      return count_words<0x7C007C007C007C00ull, 0x0400040004000400ull, 0x8000800080008000ull>(p, words) +
             count_tail<uint16_t, 0x7C00>(p + 8 * words, numel % 4);
    }
    case DType::f32: {
      const uint64_t words = numel / 2;
      return count_words<0x7F8000007F800000ull, 0x0080000000800000ull, 0x8000000080000000ull>(p, words) +
             count_tail<uint32_t, 0x7F800000u>(p + 8 * words, numel % 2);
    }
    default:
      return 0;
  }
}

std::string NonFiniteReport::describe(const std::string& dir) const {
  return "checkpoint " + dir + ": " + std::to_string(values) + " non-finite (NaN/Inf) weight value(s) in " +
         std::to_string(tensors) + " tensor(s), first '" + first_tensor + "' (" +
         std::to_string(first_values) + ")";
}

NonFiniteReport scan_nonfinite(const Checkpoint& c) {
  NonFiniteReport r;
  const auto t0 = std::chrono::steady_clock::now();
  struct Item {
    std::string name;
    const uint8_t* data = nullptr;
    DType dtype = DType::f32;
    uint64_t numel = 0, bytes = 0, bad = 0;
  };
  std::vector<Item> items;
  for (const std::string& name : c.names()) {  // sorted: "first" is stable across runs
    const TensorInfo* info = c.info(name);
    if (info == nullptr) continue;
    if (info->dtype != DType::f32 && info->dtype != DType::f16 && info->dtype != DType::bf16) continue;
    auto v = c.tensor(name);
    if (!v.ok()) continue;
    items.push_back({name, v->data, v->dtype, info->numel(), info->nbytes(), 0});
  }
  // Tensors spread over the cores (a 224 GB checkpoint at ~2-5 GB/s per core is a minute on one core).
  const unsigned threads = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 16));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < items.size();)
      items[i].bad = count_nonfinite(items[i].data, items[i].dtype, items[i].numel);
  };
  std::vector<std::thread> pool;
  for (unsigned k = 1; k < threads && k < items.size(); ++k) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  for (const Item& it : items) {
    r.bytes_scanned += it.bytes;
    if (it.bad == 0) continue;
    r.values += it.bad;
    if (r.tensors++ == 0) {
      r.first_tensor = it.name;
      r.first_values = it.bad;
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

Status check_nonfinite(const Checkpoint& c, NonFinitePolicy policy) {
  const NonFiniteReport r = scan_nonfinite(c);
  if (r.clean()) return ok_status();
  if (policy == NonFinitePolicy::refuse)
    return make_error(r.describe(c.dir()),
                      "repair or re-export the checkpoint (or load it anyway without --refuse-nonfinite)");
  spdlog::warn("{} (pass --refuse-nonfinite to refuse such a checkpoint)", r.describe(c.dir()));
  return ok_status();
}

}  // namespace spk::rt
