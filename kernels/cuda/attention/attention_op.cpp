// Paged attention: the tiled prefill kernel, the GQA-shared or per-head decode kernels with split-KV
// (attention/select.cpp chooses), the rope + cache write folded in at decode.
#include "kernels/cuda/backend_impl.h"

namespace spk::cuda {

Status CudaBackend::attention(const Tensor& q, const KvCache& cache, const AttnSpec& spec, Tensor& out) {
  const Tensor& k_cache = cache.k;
  const Tensor& v_cache = cache.v;
  if (q.rank() != 3 || q.dim(0) != n_tokens_ || k_cache.rank() != 4 || k_cache.dtype != DType::bf16 ||
      k_cache.dim(1) != block_size_ || k_cache.dim(3) != q.dim(2) || out.numel() != q.numel())
    return op_error("attention",
                    "q " + describe(q) + ", cache " + describe(k_cache) + ", out " + describe(out));
  const float* qp = q.ptr<float>();
  const auto* kc = k_cache.ptr<bf16>();
  const auto* vc = v_cache.ptr<bf16>();
  float* op = out.ptr<float>();
  const int32_t* to = table_off_;
  const int32_t* pos = positions_;
  const int32_t* tab = tables_;
  const int n = n_tokens_, hq = static_cast<int>(q.dim(1)), hk = static_cast<int>(k_cache.dim(2)),
            d = static_cast<int>(q.dim(2)), bs = block_size_, win = spec.window();
  const float scale = spec.scale;
  const AttnLaunch launch_plan = attention_launch(attn_knobs(), n, max_q_len_, hq, hk, d);
  const bool tiled = launch_plan.tiled, shared = launch_plan.shared;
  const int splits = launch_plan.splits;
  SPK_TRY(grow(partial_, launch_plan.partial_bytes));
  SPK_TRY(grow(counters_, launch_plan.counter_bytes, /*zero=*/true));  // kept zero by the kernels
  float* part = static_cast<float*>(partial_.get());
  int* ctr = shared && split_merge_ ? static_cast<int*>(counters_.get()) : nullptr;
  if (fuse_attention_rope(launch_plan, qp, kc, vc, AttnArgs{n, hq, hk, d, win, scale, op, part, ctr}))
    return ok_status();
  if (tiled) {
    const auto* tl = reinterpret_cast<const int2*>(tiles_);
    launch(OpId::attention_prefill, prefill_attention, qp, kc, vc, tl, n_tiles_, to, pos, tab, hq, hk, d, bs,
           win, scale, op, kStream);
  } else {
    launch(OpId::attention, paged_attention, qp, kc, vc, to, pos, tab, n, hq, hk, d, bs, win, scale, op,
           kStream, splits, part, shared, ctr);
  }
  return ok_status();
}

}  // namespace spk::cuda
