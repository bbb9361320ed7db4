// Loading a GPTQ 4-bit linear layer (`<prefix>.qweight/.qzeros/.scales[/.g_idx]`, layout in
// kernels/formats/gptq_int4.h) into a LinearWeight{gptq_int4}, whole or as a tensor-parallel shard.
// Called from Linear / ColumnParallelLinear / RowParallelLinear::load when the model's QuantConfig
// quantizes the module, and from the MoE loader for quantized experts.
#pragma once

#include <string>

#include "kernels/backend.h"
#include "runtime/model/quant_config.h"
#include "runtime/model/tp_shard.h"
#include "runtime/model/weight_source.h"

namespace spk::rt {

// Output rows `rows` (column-parallel: qweight/scales columns, qzeros columns in whole words of 8 outputs)
// and input columns `cols` (row-parallel: qweight rows in words of 8 inputs, scales/qzeros by group, g_idx
// sliced) of the quantized [out, in] module `prefix`. Refused by name: a backend without gptq-int4, tensors
// that disagree with the config (tensor, format and expected shape), a shard that splits a packed word or
// a scale group (act-order g_idx included).
Result<LinearWeight> load_gptq_linear(Backend& be, const WeightSource& src, const QuantConfig& q,
                                      const std::string& prefix, int64_t out, int64_t in, ShardRange rows,
                                      ShardRange cols);

}  // namespace spk::rt
