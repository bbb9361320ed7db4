#include "runtime/model/linear.h"

#include <cstring>

#include "runtime/model/linear_gptq.h"

namespace spk::rt {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

Result<HostWeight> get_checked(const WeightSource& src, const std::string& name,
                               const std::vector<int64_t>& shape) {
  SPK_ASSIGN(HostWeight hw, src.get(name));
  if (hw.shape != shape)
    return make_error("tensor '" + name + "' has shape " + shape_str(hw.shape) + ", config.json implies " +
                          shape_str(shape),
                      "the checkpoint and its config.json disagree: regenerate or re-download it");
  return hw;
}

Status check_range(const std::string& name, ShardRange r, int64_t dim) {
  if (r.begin < 0 || r.count < 0 || r.begin + int64_t{r.count} > dim)
    return make_error("slice [" + std::to_string(r.begin) + ", " + std::to_string(r.begin + r.count) +
                          ") of tensor '" + name + "' is outside its " + std::to_string(dim) +
                          " rows/columns",
                      "the shard plan does not fit the config");
  return {};
}

}  // namespace

Result<Tensor> load_weight(Backend& be, const WeightSource& src, const std::string& name,
                           const std::vector<int64_t>& shape, bool to_f32) {
  SPK_ASSIGN(HostWeight hw, get_checked(src, name, shape));
  return be.import_weight(hw.data, hw.dtype, shape, src.keepalive(),
                          to_f32 ? DType::f32 : be.weight_dtype(hw.dtype));
}

Status Linear::load(Backend& be, const WeightSource& src, const std::string& prefix, int64_t out, int64_t in,
                    bool with_bias, const QuantConfig* quant) {
  const ShardRange all_out{0, static_cast<int>(out)}, all_in{0, static_cast<int>(in)};
  if (quant && quant->quantizes(prefix)) {
    SPK_ASSIGN(w, load_gptq_linear(be, src, *quant, prefix, out, in, all_out, all_in));
  } else {
    SPK_ASSIGN(w, load_weight(be, src, prefix + ".weight", {out, in}, false));
  }
  if (with_bias) {
    SPK_ASSIGN(bias, load_weight(be, src, prefix + ".bias", {out}, true));
  }
  return ok_status();
}

Result<Tensor> load_weight_rows(Backend& be, const WeightSource& src, const std::string& name,
                                const std::vector<int64_t>& shape, ShardRange r, bool to_f32,
                                int64_t pad_rows) {
  SPK_ASSIGN(HostWeight hw, get_checked(src, name, shape));
  SPK_TRY(check_range(name, r, shape[0]));
  int64_t row = 1;
  for (size_t i = 1; i < shape.size(); ++i) row *= shape[i];
  const size_t row_bytes = static_cast<size_t>(row) * dtype_size(hw.dtype);
  const char* first = static_cast<const char*>(hw.data) + static_cast<size_t>(r.begin) * row_bytes;
  std::vector<int64_t> out_shape = shape;
  const DType want = to_f32 ? DType::f32 : be.weight_dtype(hw.dtype);
  if (pad_rows <= r.count) {  // a view into the mmap
    out_shape[0] = r.count;
    return be.import_weight(first, hw.dtype, out_shape, src.keepalive(), want);
  }
  auto buf = std::make_shared<std::vector<char>>(static_cast<size_t>(pad_rows) * row_bytes, 0);
  std::memcpy(buf->data(), first, static_cast<size_t>(r.count) * row_bytes);
  out_shape[0] = pad_rows;
  return be.import_weight(buf->data(), hw.dtype, out_shape, buf, want);
}

Result<Tensor> load_weight_cols(Backend& be, const WeightSource& src, const std::string& name,
                                const std::vector<int64_t>& shape, ShardRange c, bool to_f32) {
  SPK_ASSIGN(HostWeight hw, get_checked(src, name, shape));
  SPK_TRY(check_range(name, c, shape[1]));
  const DType want = to_f32 ? DType::f32 : be.weight_dtype(hw.dtype);
  if (c.begin == 0 && c.count == shape[1])
    return be.import_weight(hw.data, hw.dtype, shape, src.keepalive(), want);
  const size_t esz = dtype_size(hw.dtype);
  const size_t in_row = static_cast<size_t>(shape[1]) * esz, out_row = static_cast<size_t>(c.count) * esz;
  auto buf = std::make_shared<std::vector<char>>(static_cast<size_t>(shape[0]) * out_row);
  const char* base = static_cast<const char*>(hw.data) + static_cast<size_t>(c.begin) * esz;
  for (int64_t i = 0; i < shape[0]; ++i)
    std::memcpy(buf->data() + static_cast<size_t>(i) * out_row, base + static_cast<size_t>(i) * in_row,
                out_row);
  return be.import_weight(buf->data(), hw.dtype, {shape[0], c.count}, buf, want);
}

Status ColumnParallelLinear::load(Backend& be, const WeightSource& src, const std::string& prefix,
                                  int64_t out, int64_t in, ShardRange rows, bool with_bias,
                                  const QuantConfig* quant) {
  if (quant && quant->quantizes(prefix)) {
    SPK_ASSIGN(w, load_gptq_linear(be, src, *quant, prefix, out, in, rows, {0, static_cast<int>(in)}));
  } else {
    SPK_ASSIGN(w, load_weight_rows(be, src, prefix + ".weight", {out, in}, rows, false));
  }
  if (with_bias) {
    SPK_ASSIGN(bias, load_weight_rows(be, src, prefix + ".bias", {out}, rows, true));
  }
  return ok_status();
}

Status RowParallelLinear::load(Backend& be, const WeightSource& src, const std::string& prefix, int64_t out,
                               int64_t in, ShardRange cols, bool with_bias, dist::Communicator& c,
                               const QuantConfig* quant) {
  comm = &c;
  if (quant && quant->quantizes(prefix)) {
    SPK_ASSIGN(local.w, load_gptq_linear(be, src, *quant, prefix, out, in, {0, static_cast<int>(out)}, cols));
  } else {
    SPK_ASSIGN(local.w, load_weight_cols(be, src, prefix + ".weight", {out, in}, cols, false));
  }
  if (with_bias && c.rank() == 0) {
    SPK_ASSIGN(local.bias, load_weight(be, src, prefix + ".bias", {out}, true));
  }
  return ok_status();
}

Status RowParallelLinear::forward(Backend& be, const Tensor& x, Tensor& y) const {
  SPK_TRY(local.forward(be, x, y));
  if (comm == nullptr || comm->world() == 1) return ok_status();
  return dist::all_reduce_sum(be, *comm, y);
}

}  // namespace spk::rt
