// The gptq_int4 row of the linear chooser: the W4A16 GEMV (w4a16.cu) on the checkpoint layout, which the
// loader copied to the device as it is (no repack yet). Linears on the same x join one launch
// (fusion/w4a16_group.cpp); no other fusion joins it yet.
#include "kernels/cuda/backend_impl.h"
#include "kernels/cuda/linear/w4a16.h"

namespace spk::cuda {

Status CudaBackend::linear_w4a16(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& y) {
  const int64_t K = w.in, N = w.out;
  const int64_t groups = w.group_size > 0 ? (K + w.group_size - 1) / w.group_size : 1;
  const bool layout = w.values.dtype == DType::i32 && w.values.numel() == K / 8 * N &&
                      w.zeros.dtype == DType::i32 && w.zeros.numel() == groups * (N / 8) &&
                      w.scales.dtype == DType::f16 && w.scales.numel() == groups * N &&
                      (w.g_idx.empty() || (w.g_idx.dtype == DType::i32 && w.g_idx.numel() == K));
  if (!layout || K % 8 != 0 || N % 8 != 0)
    return op_error("linear", "gptq weight " + describe(w) + ": qweight " + describe(w.values) + ", qzeros " +
                                  describe(w.zeros) + ", scales " + describe(w.scales));
  if (x.dtype != DType::f32 || x.numel() % K != 0 || y.numel() != x.numel() / K * N ||
      (bias && (bias->dtype != DType::f32 || bias->numel() != N)))
    return op_error("linear", "x " + describe(x) + ", w " + describe(w) + ", y " + describe(y));
  W4A16Weight k;
  k.qweight = w.values.ptr<int32_t>(), k.qzeros = w.zeros.ptr<int32_t>();
  k.scales = w.scales.ptr<uint16_t>();
  k.g_idx = w.g_idx.empty() ? nullptr : w.g_idx.ptr<int32_t>();
  k.group_size = w.group_size, k.N = static_cast<int>(N), k.K = static_cast<int>(K);
  const int M = static_cast<int>(x.numel() / K), sms = sm_count_;
  const float* xp = x.ptr<float>();
  const W4A16Segment seg{k, bias ? bias->ptr<float>() : nullptr, y.ptr<float>()};
  if (!w4a16_groupable(k)) {
    launch(OpId::linear_w4a16, w4a16_linear, k, xp, M, seg.bias, seg.y, sms, kStream);
    return ok_status();
  }
  if (fuse_w4a16_group(seg, xp, M)) return ok_status();
  W4A16Op op;
  op.g.segs[0] = seg, op.g.n = 1, op.x = xp, op.m = M, op.sm_count = sms;
  launch(OpId::linear_w4a16, launch_w4a16, op, kStream);
  remember_w4a16(op);
  return ok_status();
}

}  // namespace spk::cuda
