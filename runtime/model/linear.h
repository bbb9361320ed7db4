// Linear layers: plain, and tensor-parallel (Megatron style). Each owns its slice of the checkpoint weight
// and the collective its output needs; with world 1 both are a plain Linear over the whole weight (no copy,
// no collective), so TP=1 runs exactly the single-rank code.
//   ColumnParallelLinear: output rows `rows` of W[out, in] (and of the bias); y is this rank's slice of
//     the output; no communication. Rows are a pointer offset into the mmap (zero-copy on CPU).
//   RowParallelLinear: input columns `cols` of W[out, in]; x is this rank's slice of the input; the
//     partial products are summed over ranks (all-reduce), every rank gets the full y. Columns are a
//     strided host copy of only this rank's slice. The bias is added once (by rank 0, before the sum).
#pragma once

#include <string>
#include <vector>

#include "kernels/backend.h"
#include "runtime/dist/communicator.h"
#include "runtime/model/quant_config.h"
#include "runtime/model/tp_shard.h"
#include "runtime/model/weight_source.h"

namespace spk::rt {

// Imports `name` into the backend after checking its shape; `want` as in Backend::import_weight
// (keep the checkpoint dtype, or f32). Error names the tensor, the expected and the found shape.
Result<Tensor> load_weight(Backend& be, const WeightSource& src, const std::string& name,
                           const std::vector<int64_t>& shape, bool to_f32);

struct Linear {
  LinearWeight w;  // [out, in]: dense in the checkpoint dtype, or a quantized format
  Tensor bias;     // [out] f32, empty when none
  // `quant`: the model's quantization (nullptr = dense); a module it quantizes loads <prefix>.qweight...
  Status load(Backend& be, const WeightSource& src, const std::string& prefix, int64_t out, int64_t in,
              bool with_bias, const QuantConfig* quant = nullptr);
  Status forward(Backend& be, const Tensor& x, Tensor& y) const {
    return be.linear(x, w, bias.empty() ? nullptr : &bias, y);
  }
  [[nodiscard]] uint64_t bytes() const { return w.bytes() + bias.nbytes(); }
};

// Rows [r.begin, r.begin + r.count) of weight `name` whose full shape is `shape`; zero rows are appended
// up to `pad_rows` when that is larger than r.count. Error names the tensor and the shapes.
Result<Tensor> load_weight_rows(Backend& be, const WeightSource& src, const std::string& name,
                                const std::vector<int64_t>& shape, ShardRange r, bool to_f32,
                                int64_t pad_rows = 0);
// Columns [c.begin, c.begin + c.count) of the 2-D weight `name` of full shape `shape`.
Result<Tensor> load_weight_cols(Backend& be, const WeightSource& src, const std::string& name,
                                const std::vector<int64_t>& shape, ShardRange c, bool to_f32);

struct ColumnParallelLinear : Linear {
  Status load(Backend& be, const WeightSource& src, const std::string& prefix, int64_t out, int64_t in,
              ShardRange rows, bool with_bias, const QuantConfig* quant = nullptr);
};

struct RowParallelLinear {
  Linear local;  // w [out, cols.count]; bias only on rank 0
  dist::Communicator* comm = nullptr;
  Status load(Backend& be, const WeightSource& src, const std::string& prefix, int64_t out, int64_t in,
              ShardRange cols, bool with_bias, dist::Communicator& c, const QuantConfig* quant = nullptr);
  // x [n, cols.count] -> y [n, out], summed over ranks.
  Status forward(Backend& be, const Tensor& x, Tensor& y) const;
  [[nodiscard]] uint64_t bytes() const { return local.bytes(); }
};

}  // namespace spk::rt
