// A linear layer's weight in its storage format: the backend seam's one type for every weight format.
// Where a new format goes: a WeightFormat row here, its CPU twin (reference kernel and layout checks) in
// kernels/formats/<format>.{h,cpp}, its repack hook in the device backend's linear/weight_import and its
// kernel in the device backend's linear/ folder; Backend::supports(WeightFormat) says which ones a backend
// runs, asked at load so an unsupported model is refused before any bytes move.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/base/status.h"
#include "kernels/tensor.h"

namespace spk {

enum class WeightFormat : uint8_t {
  dense,      // values [out, in] f32 / f16 / bf16 (the Tensor's dtype)
  gptq_int4,  // GPTQ 4-bit, checkpoint layout (kernels/formats/gptq_int4.h)
};
inline constexpr WeightFormat kAllWeightFormats[] = {WeightFormat::dense, WeightFormat::gptq_int4};

// "dense", "gptq-int4": the names errors and `sparkctl dev` print.
std::string_view weight_format_name(WeightFormat f);

struct LinearWeight {
  WeightFormat format = WeightFormat::dense;
  Tensor values;       // dense: [out, in]; gptq_int4: qweight i32 [in/8, out]
  Tensor scales;       // gptq_int4: f16 [groups, out]
  Tensor zeros;        // gptq_int4: qzeros i32 [groups, out/8] (stored as zero - 1)
  Tensor g_idx;        // gptq_int4 with act-order: i32 [in], the group of each input column; empty otherwise
  int group_size = 0;  // input columns per scale group (quantized formats)
  float global_scale = 1.0f;  // a per-tensor factor on top of the group scales (1 when the format has none)
  int64_t out = 0, in = 0;    // the logical matrix: y[n, out] = x[n, in] . W^T

  LinearWeight() = default;
  // A dense weight [out, in] (implicit: every op that took a Tensor weight takes this).
  LinearWeight(Tensor w);  // NOLINT(google-explicit-constructor)

  [[nodiscard]] bool empty() const { return values.empty(); }
  // Bytes of every tensor of the weight (a tensor with no shape counts none).
  [[nodiscard]] uint64_t bytes() const {
    auto nb = [](const Tensor& t) -> uint64_t { return t.shape.empty() ? 0 : t.nbytes(); };
    return nb(values) + nb(scales) + nb(zeros) + nb(g_idx);
  }
};

// "gptq-int4 [4096 x 11008] group 128" / "[4096, 11008] bf16" for error messages.
std::string describe(const LinearWeight& w);

}  // namespace spk
