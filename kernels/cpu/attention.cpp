// KV write into paged blocks and paged attention with GQA over the varlen batch.
// Cost per query head: ctx dot products of hd plus ctx axpys of hd; two passes over the context
// (scores, then weighted V) with an exact softmax (max subtracted), fp32.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace spk::cpu {
namespace {

Status check_cache(std::string_view op, const Tensor& c, int64_t hk, int64_t hd, int32_t block_size) {
  if (c.rank() != 4 || c.dtype != DType::f32 || c.dim(1) != block_size || c.dim(2) != hk || c.dim(3) != hd)
    return shape_error(op, "cache " + describe(c) + " is not [blocks, " + std::to_string(block_size) + ", " +
                               std::to_string(hk) + ", " + std::to_string(hd) + "] f32");
  return ok_status();
}

}  // namespace

Status CpuBackend::kv_write(const Tensor& k, const Tensor& v, KvCache& cache) {
  Tensor& k_cache = cache.k;
  Tensor& v_cache = cache.v;
  if (!have_step_) return shape_error("kv_write", "called before begin_step");
  const int64_t n = static_cast<int64_t>(step_.slots.size());
  if (k.rank() != 3 || k.dtype != DType::f32 || v.shape != k.shape || v.dtype != DType::f32 || k.dim(0) != n)
    return shape_error(
        "kv_write", "k " + describe(k) + ", v " + describe(v) + " for " + std::to_string(n) + " step tokens");
  const int64_t hk = k.dim(1), hd = k.dim(2);
  SPK_TRY(check_cache("kv_write", k_cache, hk, hd, step_.block_size));
  SPK_TRY(check_cache("kv_write", v_cache, hk, hd, step_.block_size));
  const int64_t capacity = k_cache.dim(0) * step_.block_size, row = hk * hd;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t slot = step_.slots[t];
    if (slot < 0 || slot >= capacity)
      return shape_error("kv_write", "slot " + std::to_string(slot) + " of token " + std::to_string(t) +
                                         " outside the pool of " + std::to_string(capacity) + " slots");
    std::memcpy(k_cache.ptr<float>() + slot * row, k.ptr<const float>() + t * row, row * sizeof(float));
    std::memcpy(v_cache.ptr<float>() + slot * row, v.ptr<const float>() + t * row, row * sizeof(float));
  }
  return ok_status();
}

Status CpuBackend::attention(const Tensor& q, const KvCache& cache, const AttnSpec& spec, Tensor& out) {
  const Tensor& k_cache = cache.k;
  const Tensor& v_cache = cache.v;
  const int64_t window = spec.window();
  if (!have_step_) return shape_error("attention", "called before begin_step");
  const int64_t n = static_cast<int64_t>(step_.positions.size());
  if (q.rank() != 3 || q.dtype != DType::f32 || q.dim(0) != n || out.dtype != DType::f32 ||
      out.numel() != q.numel() || k_cache.rank() != 4)
    return shape_error("attention", "q " + describe(q) + ", out " + describe(out) + ", cache " +
                                        describe(k_cache) + " for " + std::to_string(n) + " step tokens");
  const int64_t hq = q.dim(1), hd = q.dim(2), hk = k_cache.dim(2);
  SPK_TRY(check_cache("attention", k_cache, hk, hd, step_.block_size));
  SPK_TRY(check_cache("attention", v_cache, hk, hd, step_.block_size));
  if (hk == 0 || hq % hk != 0)
    return shape_error("attention",
                       std::to_string(hq) + " query heads over " + std::to_string(hk) + " kv heads");
  const int64_t group = hq / hk, bs = step_.block_size, num_blocks = k_cache.dim(0);
  for (int32_t b : step_.block_tables)
    if (b < 0 || b >= num_blocks)
      return shape_error("attention", "block id " + std::to_string(b) + " outside the pool of " +
                                          std::to_string(num_blocks) + " blocks");
  const float* qp = q.ptr<const float>();
  const float* kc = k_cache.ptr<const float>();
  const float* vc = v_cache.ptr<const float>();
  float* op = out.ptr<float>();
  const int64_t kv_row = hk * hd;
  // Grain: (token, head) items worth >= ~32K multiply-adds per chunk, so short decode steps stay inline.
  int64_t max_ctx = 1;
  for (const SeqMeta& s : step_.seqs) max_ctx = std::max<int64_t>(max_ctx, s.ctx_len);
  const int64_t grain = std::max<int64_t>(1, 32768 / (2 * hd * max_ctx));
  pool_.parallel_for(n * hq, grain, [&](int64_t w0, int64_t w1) {
    std::vector<float> scores;
    std::vector<float> acc(hd);
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t t = w / hq, h = w % hq, g = h / group;
      float* o = op + (t * hq + h) * hd;
      const int32_t s = token_seq_[t];
      if (s < 0) {  // a row no sequence owns: defined output, no reads
        std::fill(o, o + hd, 0.0f);
        continue;
      }
      const SeqMeta& seq = step_.seqs[s];
      const int32_t* table = step_.block_tables.data() + seq.bt_offset;
      const int64_t p = step_.positions[t];
      const int64_t end = std::min<int64_t>(p + 1, seq.ctx_len);
      const int64_t begin = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
      const float* qv = qp + (t * hq + h) * hd;
      scores.resize(std::max<int64_t>(0, end - begin));
      float mx = -INFINITY;
      for (int64_t j = begin; j < end; ++j) {
        const float* kv = kc + (static_cast<int64_t>(table[j / bs]) * bs + j % bs) * kv_row + g * hd;
        float d = 0;
        for (int64_t i = 0; i < hd; ++i) d += qv[i] * kv[i];
        d *= spec.scale;
        scores[j - begin] = d;
        mx = std::max(mx, d);
      }
      float sum = 0;
      for (float& x : scores) sum += (x = std::exp(x - mx));
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = begin; j < end; ++j) {
        const float pj = scores[j - begin];
        const float* vv = vc + (static_cast<int64_t>(table[j / bs]) * bs + j % bs) * kv_row + g * hd;
        for (int64_t i = 0; i < hd; ++i) acc[i] += pj * vv[i];
      }
      const float inv = sum > 0 ? 1.0f / sum : 0.0f;
      for (int64_t i = 0; i < hd; ++i) o[i] = acc[i] * inv;
    }
  });
  return ok_status();
}

}  // namespace spk::cpu
