// RoPE and the paged KV cache write (fused when one follows the other).
#include "kernels/cuda/backend_impl.h"

namespace spk::cuda {

Status CudaBackend::rope(Tensor& q, Tensor& k, const Tensor& inv_freq) {
  if (q.rank() != 3 || k.rank() != 3 || q.dim(0) != n_tokens_ || k.dim(0) != n_tokens_ ||
      inv_freq.numel() * 2 != q.dim(2))
    return op_error("rope", "q " + describe(q) + ", k " + describe(k) + ", inv_freq " + describe(inv_freq) +
                                " for a step of " + std::to_string(n_tokens_) + " tokens");
  float* qp = q.ptr<float>();
  float* kp = k.ptr<float>();
  const float* fp = inv_freq.ptr<float>();
  const int32_t* pos = positions_;
  const int n = n_tokens_, hq = static_cast<int>(q.dim(1)), hk = static_cast<int>(k.dim(1)),
            d = static_cast<int>(q.dim(2));
  launch(OpId::rope, cuda::rope, qp, kp, pos, fp, n, hq, hk, d, kStream);
  remember_rope(RopeOp{qp, kp, fp, hq, hk, d});
  return ok_status();
}

Status CudaBackend::kv_write(const Tensor& k, const Tensor& v, KvCache& cache) {
  Tensor& k_cache = cache.k;
  Tensor& v_cache = cache.v;
  if (k_cache.dtype != DType::bf16 || v_cache.dtype != DType::bf16 || k.rank() != 3 ||
      k.dim(0) != n_tokens_ || k_cache.rank() != 4 || k_cache.dim(2) != k.dim(1) ||
      k_cache.dim(3) != k.dim(2))
    return op_error("kv_write", "k " + describe(k) + " into " + describe(k_cache) + " (caches must be bf16)");
  const float* kp = k.ptr<float>();
  const float* vp = v.ptr<float>();
  auto* kc = k_cache.ptr<bf16>();
  auto* vc = v_cache.ptr<bf16>();
  const int32_t* sl = slots_;
  const int n = n_tokens_, hk = static_cast<int>(k.dim(1)), d = static_cast<int>(k.dim(2));
  if (fuse_rope_cache(kp, vp, sl, n, hk, d, kc, vc)) return ok_status();
  launch(OpId::kv_write, cuda::kv_write, kp, vp, sl, n, hk, d, kc, vc, kStream);
  return ok_status();
}

}  // namespace spk::cuda
