// `sparkctl dev quantize --format compressed-tensors`: one module's round-to-nearest GPTQ tensors
// rewritten in the layout compressed-tensors' PackedQuantizationCompressor writes (`pack-quantized`,
// runtime/model/linear_compressed_tensors.h), and the quantization_config llm-compressor writes beside it.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/dtype.h"
#include "kernels/formats/gptq_int4.h"

namespace spk::rt {

struct CtTensors {
  int64_t out = 0, in = 0, groups = 0;
  std::vector<int32_t> packed;      // weight_packed i32 [out, in/8]
  DType scale_dtype = DType::bf16;  // the model's dtype
  std::vector<uint8_t> scale;       // weight_scale [out, groups]
  std::vector<int64_t> shape;       // weight_shape i64 [2]
  std::vector<int32_t> zero_point;  // weight_zero_point i32 [out/8, groups] (asym only)
  std::vector<int32_t> g_idx;       // weight_g_idx i32 [in] (actorder "group" only)
  // The tensor `field` ("weight_packed", ...) as {data, dtype, shape}; data null when not written.
  struct Field {
    const void* data = nullptr;
    DType dtype = DType::i32;
    std::vector<int64_t> shape;
  };
  [[nodiscard]] Field field(const std::string& name) const;
  [[nodiscard]] std::vector<std::string> fields() const;  // those written, in the producer's order
};

// t's layer in the compressed-tensors layout. t's scales are first rounded (in place) to values that both
// scale_dtype and f16 hold exactly, so the checkpoint, its dequantized twin (from t) and the gptq-int4 weight
// it loads into agree bit for bit. act_order: write t's g_idx (actorder "group").
CtTensors gptq_to_compressed_tensors(GptqTensors& t, DType scale_dtype, bool sym, bool act_order);

// quantization_config for config.json: quant_method compressed-tensors, format pack-quantized, one group
// targeting Linear with int 4-bit weights (group_size -1: strategy channel).
nlohmann::json compressed_tensors_config(int group_size, bool sym, bool act_order,
                                         const nlohmann::json& ignore);

}  // namespace spk::rt
