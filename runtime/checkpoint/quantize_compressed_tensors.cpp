#include "runtime/checkpoint/quantize_compressed_tensors.h"

#include <cstring>

namespace spk::rt {

CtTensors::Field CtTensors::field(const std::string& name) const {
  if (name == "weight_packed") return {packed.data(), DType::i32, {out, in / 8}};
  if (name == "weight_scale") return {scale.data(), scale_dtype, {out, groups}};
  if (name == "weight_shape") return {shape.data(), DType::i64, {2}};
  if (name == "weight_zero_point" && !zero_point.empty())
    return {zero_point.data(), DType::i32, {out / 8, groups}};
  if (name == "weight_g_idx" && !g_idx.empty()) return {g_idx.data(), DType::i32, {in}};
  return {};
}

std::vector<std::string> CtTensors::fields() const {
  std::vector<std::string> f = {"weight_packed", "weight_scale", "weight_shape"};
  if (!zero_point.empty()) f.push_back("weight_zero_point");
  if (!g_idx.empty()) f.push_back("weight_g_idx");
  return f;
}

CtTensors gptq_to_compressed_tensors(GptqTensors& t, DType scale_dtype, bool sym, bool act_order) {
  CtTensors c;
  c.out = t.out, c.in = t.in, c.groups = t.groups();
  c.scale_dtype = scale_dtype;
  c.shape = {t.out, t.in};
  const int64_t out = t.out, in = t.in, groups = c.groups;
  // qweight [in/8, out] -> weight_packed [out, in/8]: the same words (q + 8 is GPTQ's unsigned nibble).
  c.packed.resize(static_cast<size_t>(out * (in / 8)));
  for (int64_t i = 0; i < in / 8; ++i)
    for (int64_t o = 0; o < out; ++o) c.packed[o * (in / 8) + i] = t.qweight[i * out + o];
  // scales f16 [groups, out] -> weight_scale [out, groups] in the model's dtype.
  c.scale.resize(static_cast<size_t>(out * groups) * dtype_size(scale_dtype));
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t o = 0; o < out; ++o) {
      uint16_t& h = t.scales[g * out + o];
      float v = f16_to_f32(h);
      if (scale_dtype == DType::bf16) {
        v = bf16_to_f32(f32_to_bf16(v));
        h = f32_to_f16(v);
        v = f16_to_f32(h);  // equal unless v left f16's normal range
        const uint16_t b = f32_to_bf16(v);
        std::memcpy(c.scale.data() + 2 * (o * groups + g), &b, 2);
      } else if (scale_dtype == DType::f16) {
        std::memcpy(c.scale.data() + 2 * (o * groups + g), &h, 2);
      } else {
        std::memcpy(c.scale.data() + 4 * (o * groups + g), &v, 4);
      }
    }
  // qzeros [groups, out/8] (zero - 1, packed along out) -> weight_zero_point [out/8, groups] holding
  // z + 8 = zero (packed along out: packed_dim 0).
  if (!sym) {
    c.zero_point.resize(static_cast<size_t>(out / 8 * groups));
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t w = 0; w < out / 8; ++w) {
        const auto stored = static_cast<uint32_t>(t.qzeros[g * (out / 8) + w]);
        uint32_t word = 0;
        for (int k = 0; k < 8; ++k) word |= (((stored >> (4 * k)) & 15u) + 1) << (4 * k);
        c.zero_point[w * groups + g] = static_cast<int32_t>(word);
      }
  }
  if (act_order) c.g_idx = t.g_idx;
  return c;
}

nlohmann::json compressed_tensors_config(int group_size, bool sym, bool act_order,
                                         const nlohmann::json& ignore) {
  using nlohmann::json;
  const bool channel = group_size <= 0;
  json weights = {{"actorder", act_order ? json("group") : json(nullptr)},
                  {"block_structure", nullptr},
                  {"dynamic", false},
                  {"group_size", channel ? json(nullptr) : json(group_size)},
                  {"num_bits", 4},
                  {"observer", "minmax"},
                  {"observer_kwargs", json::object()},
                  {"strategy", channel ? "channel" : "group"},
                  {"symmetric", sym},
                  {"type", "int"}};
  json group = {{"format", "pack-quantized"},
                {"input_activations", nullptr},
                {"output_activations", nullptr},
                {"targets", json::array({"Linear"})},
                {"weights", weights}};
  return {{"config_groups", {{"group_0", group}}},
          {"format", "pack-quantized"},
          {"global_compression_ratio", nullptr},
          {"ignore", ignore},
          {"kv_cache_scheme", nullptr},
          {"quant_method", "compressed-tensors"},
          {"quantization_status", "compressed"},
          {"sparsity_config", json::object()},
          {"transform_config", json::object()},
          {"version", "0.12.2"}};
}

}  // namespace spk::rt
