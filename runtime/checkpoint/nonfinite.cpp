#include "runtime/checkpoint/nonfinite.h"

#include <spdlog/spdlog.h>

#include <bit>
#include <chrono>
#include <cstring>

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
  for (const std::string& name : c.names()) {  // sorted: "first" is stable across runs
    const TensorInfo* info = c.info(name);
    if (info == nullptr) continue;
    if (info->dtype != DType::f32 && info->dtype != DType::f16 && info->dtype != DType::bf16) continue;
    auto v = c.tensor(name);
    if (!v.ok()) continue;
    const uint64_t n = count_nonfinite(v->data, v->dtype, info->numel());
    r.bytes_scanned += info->nbytes();
    if (n == 0) continue;
    r.values += n;
    if (r.tensors++ == 0) {
      r.first_tensor = name;
      r.first_values = n;
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
