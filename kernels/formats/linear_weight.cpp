#include "kernels/formats/linear_weight.h"

namespace spk {

std::string_view weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::dense:
      return "dense";
    case WeightFormat::gptq_int4:
      return "gptq-int4";
  }
  return "?";
}

LinearWeight::LinearWeight(Tensor w) : values(std::move(w)) {
  if (values.rank() == 2) out = values.dim(0), in = values.dim(1);
}

std::string describe(const LinearWeight& w) {
  if (w.format == WeightFormat::dense) return describe(w.values);
  std::string s = std::string(weight_format_name(w.format)) + " [" + std::to_string(w.out) + " x " +
                  std::to_string(w.in) + "]";
  if (w.group_size > 0) s += " group " + std::to_string(w.group_size);
  if (!w.g_idx.empty()) s += " act-order";
  return s;
}

}  // namespace spk
