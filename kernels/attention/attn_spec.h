// Which attention a layer runs: the backend seam's one type for every attention kind.
// Where a new kind goes (block-sparse, a speculative verify tree): an AttnKind row here with its fields in
// AttnSpec, its CPU twin in kernels/attention/<kind>.{h,cpp}, its kernel and a row in the device backend's
// attention/select.cpp; Backend::supports(AttnKind) says which kinds a backend runs, asked at load.
#pragma once

#include <cstdint>
#include <string_view>

namespace spk {

enum class AttnKind : uint8_t {
  causal,   // query at position p sees cached keys j <= p
  sliding,  // causal, and p - j < sliding_window
};
inline constexpr AttnKind kAllAttnKinds[] = {AttnKind::causal, AttnKind::sliding};

std::string_view attn_kind_name(AttnKind k);

struct AttnSpec {
  AttnKind kind = AttnKind::causal;
  float scale = 1.0f;      // usually 1/sqrt(head_dim)
  int sliding_window = 0;  // AttnKind::sliding: the window (> 0)

  static AttnSpec causal(float scale) { return AttnSpec{AttnKind::causal, scale, 0}; }
  // window 0 is full attention (configs write it so): causal.
  static AttnSpec windowed(float scale, int window) {
    return window > 0 ? AttnSpec{AttnKind::sliding, scale, window} : causal(scale);
  }
  // The window a kernel applies: 0 (none) unless the kind is sliding.
  [[nodiscard]] int window() const { return kind == AttnKind::sliding ? sliding_window : 0; }
};

}  // namespace spk
