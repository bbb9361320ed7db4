// Element-wise ops: embedding, rmsnorm (with the residual add), silu_mul, gather_rows. An rmsnorm may
// fold into the GEMV before or after it (linear/linear_op.cpp).
#include "kernels/cuda/backend_impl.h"

namespace spk::cuda {

Status CudaBackend::embedding(const Tensor& table, const Tensor& ids, Tensor& out) {
  if (table.rank() != 2 || (table.dtype != DType::bf16 && table.dtype != DType::f32) ||
      ids.dtype != DType::i32 || out.numel() != ids.numel() * table.dim(1))
    return op_error("embedding", describe(table) + ", ids " + describe(ids) + ", out " + describe(out));
  const bool is_bf16 = table.dtype == DType::bf16;
  const int n = static_cast<int>(ids.numel()), d = static_cast<int>(table.dim(1)),
            v = static_cast<int>(table.dim(0));
  const void* tp = table.data;
  const int32_t* ip = ids.ptr<int32_t>();
  float* op = out.ptr<float>();
  launch(OpId::embedding, cuda::embedding, tp, is_bf16, ip, n, d, v, op, kStream);
  return ok_status();
}

Status CudaBackend::rmsnorm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  return norm(x, nullptr, w, eps, out);
}

Status CudaBackend::add_rmsnorm(Tensor& residual, const Tensor& delta, const Tensor& w, float eps,
                                Tensor& out) {
  if (residual.numel() != delta.numel())
    return op_error("add_rmsnorm", describe(residual) + " + " + describe(delta));
  return norm(delta, &residual, w, eps, out);
}

Status CudaBackend::norm(const Tensor& x, Tensor* residual, const Tensor& w, float eps, Tensor& out) {
  if (w.dtype != DType::f32 || x.dtype != DType::f32 || w.numel() == 0 || x.numel() % w.numel() != 0 ||
      out.numel() != x.numel())
    return op_error("rmsnorm", "x " + describe(x) + ", w " + describe(w) + ", out " + describe(out));
  const float* xp = x.ptr<float>();
  float* rp = residual ? residual->ptr<float>() : nullptr;
  const float* wp = w.ptr<float>();
  float* op = out.ptr<float>();
  const int dim = static_cast<int>(w.numel()), rows = static_cast<int>(x.numel() / w.numel());
  if (fuse_residual_into_gemv(xp, rp, rows, dim)) xp = rp, rp = nullptr;  // rmsnorm(residual) is left
  launch(OpId::rmsnorm, cuda::rmsnorm, xp, rp, wp, rows, dim, eps, op, kStream);
  if (!rp) remember_norm(xp, wp, eps, op, rows, dim);
  return ok_status();
}

Status CudaBackend::silu_mul(const Tensor& gate, const Tensor& up, Tensor& out) {
  if (gate.numel() != up.numel() || out.numel() != gate.numel() || gate.dtype != DType::f32)
    return op_error("silu_mul", describe(gate) + " * " + describe(up) + " -> " + describe(out));
  const float* gp = gate.ptr<float>();
  const float* up_ = up.ptr<float>();
  float* op = out.ptr<float>();
  const int64_t n = gate.numel();
  if (fuse_swiglu_into_gemv(gp, up_, n, op)) return ok_status();
  launch(OpId::silu_mul, cuda::silu_mul, gp, up_, n, op, kStream);
  return ok_status();
}

Status CudaBackend::gather_rows(const Tensor& x, const Tensor& rows, Tensor& out) {
  if (x.rank() < 1 || rows.dtype != DType::i32 || out.numel() != rows.numel() * (x.numel() / x.dim(0)))
    return op_error("gather_rows", describe(x) + " rows " + describe(rows) + " -> " + describe(out));
  const float* xp = x.ptr<float>();
  const int32_t* rp = rows.ptr<int32_t>();
  float* op = out.ptr<float>();
  const int m = static_cast<int>(rows.numel()), width = static_cast<int>(x.numel() / x.dim(0));
  launch(OpId::gather_rows, cuda::gather_rows, xp, rp, m, width, op, kStream);
  return ok_status();
}

}  // namespace spk::cuda
