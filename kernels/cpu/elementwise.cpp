// Embedding gather, silu(gate) * up, row gather: memory-bound one-pass ops.
#include <cmath>

#include "kernels/cpu/cpu_backend.h"

namespace spk::cpu {

Status CpuBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  if (table.rank() != 2 || !is_float(table.dtype) || ids.dtype != DType::i32 || out.dtype != DType::f32 ||
      out.numel() != ids.numel() * table.dim(1))
    return shape_error("embedding",
                       "table " + describe(table) + ", ids " + describe(ids) + ", out " + describe(out));
  const int64_t vocab = table.dim(0), d = table.dim(1), n = ids.numel();
  const int32_t* ip = ids.ptr<const int32_t>();
  for (int64_t i = 0; i < n; ++i)
    if (ip[i] < 0 || ip[i] >= vocab)
      return make_error("embedding: token id " + std::to_string(ip[i]) + " outside the vocabulary of " +
                            std::to_string(vocab),
                        "pass token ids below vocab_size (check the tokenizer matches the model)");
  for (int64_t i = 0; i < n; ++i) load_f32(table.data, table.dtype, ip[i] * d, d, out.ptr<float>() + i * d);
  return ok_status();
}

Status CpuBackend::silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  if (gate.dtype != DType::f32 || up.dtype != DType::f32 || out.dtype != DType::f32 ||
      gate.numel() != up.numel() || out.numel() != gate.numel())
    return shape_error("silu_mul",
                       "gate " + describe(gate) + ", up " + describe(up) + ", out " + describe(out));
  const float* g = gate.ptr<const float>();
  const float* u = up.ptr<const float>();
  float* o = out.ptr<float>();
  pool_.parallel_for(gate.numel(), 16384, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  });
  return ok_status();
}

Status CpuBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) {
  if (x.rank() < 1 || x.dtype != out.dtype || rows.dtype != DType::i32 || out.rank() < 1 ||
      out.dim(0) != rows.numel() || (x.dim(0) > 0 && out.numel() != rows.numel() * (x.numel() / x.dim(0))))
    return shape_error("gather_rows",
                       "x " + describe(x) + ", rows " + describe(rows) + ", out " + describe(out));
  const int32_t* rp = rows.ptr<const int32_t>();
  const size_t row_bytes = x.dim(0) ? x.nbytes() / x.dim(0) : 0;
  for (int64_t i = 0; i < rows.numel(); ++i) {
    if (rp[i] < 0 || rp[i] >= x.dim(0))
      return shape_error("gather_rows", "row " + std::to_string(rp[i]) + " of " + describe(x));
    std::memcpy(static_cast<uint8_t*>(out.data) + i * row_bytes,
                static_cast<const uint8_t*>(x.data) + rp[i] * row_bytes, row_bytes);
  }
  return ok_status();
}

}  // namespace spk::cpu
