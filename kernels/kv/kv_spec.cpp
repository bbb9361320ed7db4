#include "kernels/kv/kv_spec.h"

namespace spk {

std::string_view kv_format_name(KvFormat f) {
  switch (f) {
    case KvFormat::f32:
      return "f32";
    case KvFormat::bf16:
      return "bf16";
  }
  return "?";
}

std::optional<KvFormat> parse_kv_format(std::string_view name) {
  for (KvFormat f : kAllKvFormats)
    if (kv_format_name(f) == name) return f;
  if (name == "bfloat16") return KvFormat::bf16;
  if (name == "float32") return KvFormat::f32;
  return std::nullopt;
}

DType kv_element_dtype(KvFormat f) { return f == KvFormat::bf16 ? DType::bf16 : DType::f32; }

uint64_t KvSpec::bytes_per_token() const {
  if (latent_dim > 0)
    return static_cast<uint64_t>(latent_dim) * dtype_size(kv_element_dtype(format)) *
           static_cast<uint64_t>(layers);
  const uint64_t per_layer = uint64_t{2} * static_cast<uint64_t>(kv_heads) * static_cast<uint64_t>(head_dim) *
                             dtype_size(kv_element_dtype(format));
  return per_layer * static_cast<uint64_t>(layers);
}

}  // namespace spk
