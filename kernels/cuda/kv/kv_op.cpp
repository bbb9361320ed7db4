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
  push([=](cudaStream_t s) { return cuda::rope(qp, kp, pos, fp, n, hq, hk, d, s); },
       {op_id(OpId::rope), u(qp), u(kp), u(fp), u(pos), u(int64_t(n)), u(int64_t(hq)), u(int64_t(hk)),
        u(int64_t(d)), gen_});
  ph_.rope = RopeOp{qp, kp, fp, hq, hk, d};  // a kv_write of this k right after joins it (rope_and_cache)
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
  if (rope_fuse_ && ph_.rope.k == kp && ph_.rope.hk == hk &&
      ph_.rope.d == d) {  // the previous op roped this k: fuse
    const RopeOp r = ph_.rope;
    const int32_t* pos = positions_;
    queue_.replace_last(
        [=](cudaStream_t s) {
          return cuda::rope_and_cache(r.q, r.k, vp, pos, r.inv_freq, sl, n, r.hq, hk, d, kc, vc, s);
        },
        {op_id(OpId::rope_and_cache), u(r.q), u(kp), u(vp), u(pos), u(r.inv_freq), u(sl), u(int64_t(n)),
         u(int64_t(r.hq)), u(int64_t(hk)), u(int64_t(d)), u(kc), u(vc), gen_});
    ph_.rope = RopeOp{};
    ph_.rope_cache = DecodeRope{r.q, r.k, vp, r.inv_freq, sl, kc, vc};
    return ok_status();
  }
  push([=](cudaStream_t s) { return cuda::kv_write(kp, vp, sl, n, hk, d, kc, vc, s); },
       {op_id(OpId::kv_write), u(kp), u(vp), u(kc), u(vc), u(sl), u(int64_t(n)), u(int64_t(hk)),
        u(int64_t(d)), gen_});
  return ok_status();
}

}  // namespace spk::cuda
