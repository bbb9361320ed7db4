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
  mla,      // causal multi-head latent attention (DeepSeek-V2/V3) over a latent cache (AttnSpec::mla)
};
inline constexpr AttnKind kAllAttnKinds[] = {AttnKind::causal, AttnKind::sliding, AttnKind::mla};

std::string_view attn_kind_name(AttnKind k);

// AttnKind::mla's shapes (per head unless said otherwise). A token's cache row is its latent
// c = kv_a_layernorm(kv_a x) [kv_lora] followed by its roped key part k_pe [rope] (shared by every head).
// Query head h: q = [q_nope (nope) | q_pe (rope)]; k_h = [W_uk[h] c | k_pe], v_h = W_uv[h] c, with
// kv_b [heads * (nope + v), kv_lora] = per head W_uk [nope, kv_lora] then W_uv [v, kv_lora].
enum class MlaPath : uint8_t {
  automatic,  // absorbed for decode rows (a sequence with q_len 1), reference otherwise
  reference,  // up-project every cached latent through kv_b (what transformers computes)
  absorbed,   // q_nope . W_uk[h] against the latent; W_uv[h] on the weighted latent sum
};
struct MlaDims {
  int kv_lora = 0, nope = 0, rope = 0, v = 0;
  bool interleave = true;    // rope_interleave: the rope dims are (x0, x1) pairs (transformers' default)
  float rope_factor = 1.0f;  // multiplies cos and sin (yarn's attention factor)
  MlaPath path = MlaPath::automatic;
  [[nodiscard]] int latent() const { return kv_lora + rope; }  // cache values per token
  [[nodiscard]] int qk() const { return nope + rope; }
};

struct AttnSpec {
  AttnKind kind = AttnKind::causal;
  float scale = 1.0f;      // usually 1/sqrt(head_dim)
  int sliding_window = 0;  // AttnKind::sliding: the window (> 0)
  MlaDims mla;             // AttnKind::mla

  static AttnSpec causal(float scale) { return AttnSpec{AttnKind::causal, scale, 0, {}}; }
  // window 0 is full attention (configs write it so): causal.
  static AttnSpec windowed(float scale, int window) {
    return window > 0 ? AttnSpec{AttnKind::sliding, scale, window, {}} : causal(scale);
  }
  // The window a kernel applies: 0 (none) unless the kind is sliding.
  [[nodiscard]] int window() const { return kind == AttnKind::sliding ? sliding_window : 0; }
};

}  // namespace spk
