// compressed-tensors `pack-quantized` W4A16 linear modules, converted at load into the GPTQ int4 layout
// (kernels/formats/gptq_int4.h) so the gptq-int4 kernels run them unchanged. The producers' layout
// (compressed_tensors/compressors/quantized_compressors/pack_quantized.py), per module `<prefix>.`:
//   weight_packed     i32 [out, ceil(in/8)]: 8 4-bit values per word along the input dim, low bits
//                     first, each stored as q + 8 (q the signed value in [-8, 7]).
//   weight_scale      model dtype [out, groups] (groups = in / group_size, 1 for strategy channel).
//   weight_shape      i64 (or i32) [2] = {out, in}.
//   weight_zero_point i32 [ceil(out/8), groups], asymmetric only: the signed zero point z in [-8, 7]
//                     stored as z + 8, packed along the OUTPUT dim (packed_dim 0), low bits first.
//   weight_g_idx      i32 [in], actorder "group" only: the group of each input column.
// Dequant: W[o][c] = scale[o][g] * (q - z) = scale * ((q + 8) - (z + 8)): the stored nibbles are exactly
// GPTQ's q and zero, so weight_packed transposed is qweight and qzeros holds (z + 8) - 1 (sym: z = 0, so
// 7). A stored zero nibble 0 (z = -8) has no GPTQ v1 encoding and is refused; a scale that f16 does not
// hold exactly is refused.
#pragma once

#include <memory>
#include <string>

#include "kernels/formats/linear_weight.h"
#include "runtime/model/quant_config.h"
#include "runtime/model/weight_source.h"

namespace spk::rt {

struct ConvertedModule {
  LinearWeight w;              // gptq_int4, host tensors held by `keep`
  std::shared_ptr<void> keep;  // the converted buffers
};

// The whole module `prefix` [out, in] as gptq-int4 host tensors. Errors name the tensor, the format and
// the expected shape (or the value that does not convert).
Result<ConvertedModule> compressed_tensors_module(const WeightSource& src, const QuantConfig& q,
                                                  const std::string& prefix, int64_t out, int64_t in);

}  // namespace spk::rt
