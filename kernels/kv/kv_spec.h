// The paged KV cache's format and geometry: the backend seam's one type for every KV format.
// Where a new format goes (fp8, int4 with scales): a KvFormat row here, its CPU twin (quantise on write,
// dequantise on read) in kernels/kv/<format>.{h,cpp}, its kernels in the device backend's kv/ and
// attention/ folders. The memory planner and the block manager read bytes per token from KvSpec, so a
// smaller format gives more blocks with no other change.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "kernels/tensor.h"

namespace spk {

enum class KvFormat : uint8_t { f32, bf16 };
inline constexpr KvFormat kAllKvFormats[] = {KvFormat::f32, KvFormat::bf16};

// "f32", "bf16": the spelling of --kv-cache-dtype and of errors.
std::string_view kv_format_name(KvFormat f);
std::optional<KvFormat> parse_kv_format(std::string_view name);
// The element type of a cache of this format (its K and V tensors).
DType kv_element_dtype(KvFormat f);

// One rank's cache: `layers` layers of K and V blocks [num_blocks, block_size, kv_heads, head_dim], or, for
// a latent cache (MLA: latent_dim > 0), one tensor [num_blocks, block_size, 1, latent_dim] per layer and no
// V (the latent + the roped key part: 576 values per token for DeepSeek-V3; every TP rank holds all of it).
struct KvSpec {
  KvFormat format = KvFormat::f32;
  int block_size = 16;
  int kv_heads = 0;  // this rank's
  int head_dim = 0;
  int layers = 0;
  int latent_dim = 0;  // MLA latent cache: values per token per layer (0: a K/V cache)
  int group = 0;       // elements per scale of a quantised format (0: none; no format built yet has scales)

  // Bytes one token takes across all layers, K and V (a format with scales adds them here).
  [[nodiscard]] uint64_t bytes_per_token() const;
  [[nodiscard]] uint64_t block_bytes() const { return bytes_per_token() * static_cast<uint64_t>(block_size); }
};

// One layer's cache: K and V, and their scales when the format has them (empty otherwise). A latent
// cache keeps its rows in k; v is empty.
struct KvCache {
  Tensor k, v;
  Tensor k_scale, v_scale;
};

}  // namespace spk
