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
  uint32_t scale_bits;
  std::memcpy(&scale_bits, &scale, 4);
  const AttnLaunch launch = attention_launch(attn_knobs(), n, max_q_len_, hq, hk, d);
  const bool tiled = launch.tiled, shared = launch.shared;
  const int splits = launch.splits;
  SPK_TRY(grow(partial_, launch.partial_bytes));
  SPK_TRY(grow(counters_, launch.counter_bytes, /*zero=*/true));  // kept zero by the kernels
  float* part = static_cast<float*>(partial_.get());
  int* ctr = shared && split_merge_ ? static_cast<int*>(counters_.get()) : nullptr;
  // Fingerprint: what both kernels read and write; each op adds its own id and inputs in front.
  std::vector<uint64_t> fp = {u(kc),
                              u(vc),
                              u(op),
                              u(to),
                              u(pos),
                              u(tab),
                              u(int64_t(n)),
                              u(int64_t(hq)),
                              u(int64_t(hk)),
                              u(int64_t(d)),
                              u(int64_t(bs)),
                              u(int64_t(win)),
                              scale_bits,
                              u(int64_t(splits)),
                              u(ctr),
                              u(part),
                              gen_};
  if (attn_rope_fuse_ && shared && !tiled && max_q_len_ == 1 && (splits == 1 || ctr) &&
      ph_.rope_cache.q == qp && ph_.rope_cache.k_cache == kc && ph_.rope_cache.v_cache == vc) {
    // The previous op is the rope + cache write of this q at a decode step: the attention does it.
    const DecodeRope r = ph_.rope_cache;
    fp.insert(fp.begin(), {op_id(OpId::attention_rope), u(r.q), u(r.k), u(r.v), u(r.inv_freq), u(r.slots)});
    queue_.replace_last(
        [=](cudaStream_t s) {
          return paged_attention_rope(r, to, pos, tab, n, hq, hk, d, bs, win, scale, op, s, splits, part,
                                      ctr);
        },
        fp);
    ph_.rope_cache = DecodeRope{};
    return ok_status();
  }
  const auto* tl = reinterpret_cast<const int2*>(tiles_);
  const int nt = n_tiles_;
  fp.insert(fp.begin(),
            {op_id(OpId::attention), u(qp), u(tl), u(int64_t(tiled ? nt : -1)), u(int64_t(shared))});
  push(
      [=](cudaStream_t s) {
        if (tiled)
          return prefill_attention(qp, kc, vc, tl, nt, to, pos, tab, hq, hk, d, bs, win, scale, op, s);
        return paged_attention(qp, kc, vc, to, pos, tab, n, hq, hk, d, bs, win, scale, op, s, splits, part,
                               shared, ctr);
      },
      fp);
  return ok_status();
}

}  // namespace spk::cuda
