// An op's fingerprint (graph_queue.h: a step replays as a CUDA graph only when every op's fingerprint
// repeats) is made of the very values its kernel is launched with: the op's id, every launch argument, the
// step generation. Ops queue through CudaBackend::launch(OpId, kernel, args...) (backend_impl.h), which
// binds the same arguments into the kernel call and into the fingerprint, so a parameter that changes the
// launch can never be left out of the key. Pointers and numbers are one word each; a struct passed to a
// kernel lists its fields once, here, beside the others.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <type_traits>

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/linear/w4a16.h"
#include "kernels/cuda/moe/moe_ffn.h"
#include "kernels/cuda/op_ids.h"
#include "kernels/moe_route.h"

namespace spk::cuda {

// Stands where the stream goes in a launch's argument list: launch(id, sample_rows, ..., kStream, am).
struct StreamArg {};
inline constexpr StreamArg kStream{};

class Fingerprint {
 public:
  void add(uint64_t w) {
    if (n_ == words_.size()) std::abort();  // a launch of more than 96 words: raise kMaxWords
    words_[n_++] = w;
  }
  [[nodiscard]] std::span<const uint64_t> words() const { return {words_.data(), n_}; }

 private:
  static constexpr size_t kMaxWords = 96;
  std::array<uint64_t, kMaxWords> words_;
  size_t n_ = 0;
};

inline void fp_add(Fingerprint&, StreamArg) {}
template <class T>
void fp_add(Fingerprint& f, T* p) {
  f.add(reinterpret_cast<uint64_t>(p));
}
template <class T>
requires(std::is_integral_v<T> || std::is_enum_v<T>) void fp_add(Fingerprint& f, T v) {
  f.add(static_cast<uint64_t>(v));
}
inline void fp_add(Fingerprint& f, float v) { f.add(std::bit_cast<uint32_t>(v)); }

inline void fp_add(Fingerprint& f, const GemvSegment& s) {
  fp_add(f, s.W), fp_add(f, s.bias), fp_add(f, s.y), fp_add(f, s.N);
}
inline void fp_add(Fingerprint& f, const GemvFusion& x) {
  fp_add(f, x.norm_w), fp_add(f, x.norm_eps), fp_add(f, x.norm_out), fp_add(f, x.accum);
  fp_add(f, x.swiglu_out), fp_add(f, x.argmax);
}
inline void fp_add(Fingerprint& f, const DecodeRope& r) {
  fp_add(f, r.q), fp_add(f, r.k), fp_add(f, r.v), fp_add(f, r.inv_freq), fp_add(f, r.slots);
  fp_add(f, r.k_cache), fp_add(f, r.v_cache);
}
inline void fp_add(Fingerprint& f, const W4A16Weight& w) {
  fp_add(f, w.qweight), fp_add(f, w.qzeros), fp_add(f, w.scales), fp_add(f, w.g_idx);
  fp_add(f, w.group_size), fp_add(f, w.N), fp_add(f, w.K);
}
inline void fp_add(Fingerprint& f, const W4A16Group& g) {
  fp_add(f, g.n);
  for (int i = 0; i < g.n; ++i) fp_add(f, g.segs[i].w), fp_add(f, g.segs[i].bias), fp_add(f, g.segs[i].y);
}
inline void fp_add(Fingerprint& f, const MoeShape& s) {
  fp_add(f, s.n_experts), fp_add(f, s.d), fp_add(f, s.max_inter), fp_add(f, s.vec);
}
inline void fp_add(Fingerprint& f, const MoeRouteSpec& s) {
  fp_add(f, s.num_experts), fp_add(f, s.top_k), fp_add(f, s.n_group), fp_add(f, s.topk_group);
  fp_add(f, s.score), fp_add(f, s.norm_topk_prob), fp_add(f, s.scaling), fp_add(f, s.shared);
  fp_add(f, s.shared_gated);
}

// The argument as the kernel receives it: the queue's stream where kStream stands.
template <class T>
const T& launch_arg(const T& a, cudaStream_t) {
  return a;
}
inline cudaStream_t launch_arg(StreamArg, cudaStream_t s) { return s; }

}  // namespace spk::cuda
