// Multi-head latent attention (DeepSeek-V2/V3) on the CPU: RoPE of the rope part, the latent cache write
// and attention over the latent cache, in two ways that must agree (tests/kernels/mla_attention_test.cpp):
//   reference: every cached latent c_j up-projected through kv_b into k_nope_j[h] = W_uk[h] c_j and
//              v_j[h] = W_uv[h] c_j, then ordinary attention (what transformers computes);
//   absorbed:  q_lat[h] = W_uk[h]^T q_nope[h] scores against c_j directly, o_lat[h] = sum_j p_j c_j and
//              out[h] = W_uv[h] o_lat[h] (DeepSeek's decode path: the context is read once, as 576 values a
//              token, and kv_b is applied per query instead of per cached token).
// Napkin math per query head and context token: reference (nope + v) * kv_lora multiply-adds to
// up-project (shared by the step's queries of that sequence) + qk + v; absorbed kv_lora + rope + kv_lora,
// plus (nope + v) * kv_lora once per query. Scores and softmax in fp32, max subtracted.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace spk::cpu {
namespace {

Status check_latent_cache(std::string_view op, const Tensor& c, int64_t latent, int32_t block_size) {
  if (c.rank() != 4 || c.dtype != DType::f32 || c.dim(1) != block_size || c.dim(2) != 1 || c.dim(3) != latent)
    return shape_error(op, "latent cache " + describe(c) + " is not [blocks, " + std::to_string(block_size) +
                               ", 1, " + std::to_string(latent) + "] f32");
  return ok_status();
}

// One rope vector of `r` values in place (see Backend::mla_rope).
void rope_one(float* x, int64_t r, const float* c, const float* s, bool interleave, float* tmp) {
  const int64_t half = r / 2;
  if (interleave) {
    for (int64_t i = 0; i < half; ++i) tmp[i] = x[2 * i], tmp[half + i] = x[2 * i + 1];
    std::memcpy(x, tmp, r * sizeof(float));
  }
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    x[i] = a * c[i] - b * s[i];
    x[i + half] = b * c[i] + a * s[i];
  }
}

}  // namespace

Status CpuBackend::mla_rope(Tensor& q, Tensor& k_pe, const Tensor& inv_freq, const AttnSpec& spec) {
  if (!have_step_) return shape_error("mla_rope", "called before begin_step");
  const MlaDims& d = spec.mla;
  const int64_t n = static_cast<int64_t>(step_.positions.size()), r = d.rope, qk = d.qk();
  if (q.rank() != 3 || q.dtype != DType::f32 || q.dim(0) != n || q.dim(2) != qk || k_pe.numel() != n * r ||
      k_pe.dtype != DType::f32 || r % 2 != 0 || inv_freq.numel() * 2 != r || inv_freq.dtype != DType::f32)
    return shape_error("mla_rope", "q " + describe(q) + ", k_pe " + describe(k_pe) + ", inv_freq " +
                                       describe(inv_freq) + " for " + std::to_string(n) + " tokens, nope " +
                                       std::to_string(d.nope) + ", rope " + std::to_string(r));
  const int64_t hq = q.dim(1), half = r / 2;
  const float* inv = inv_freq.ptr<const float>();
  float* qp = q.ptr<float>();
  float* kp = k_pe.ptr<float>();
  pool_.parallel_for(n, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> c(half), s(half), tmp(r);
    for (int64_t t = t0; t < t1; ++t) {
      const float pos = static_cast<float>(step_.positions[t]);
      for (int64_t i = 0; i < half; ++i) {
        const float angle = pos * inv[i];  // fp32 product, as transformers' freqs matmul
        c[i] = static_cast<float>(std::cos(static_cast<double>(angle))) * d.rope_factor;
        s[i] = static_cast<float>(std::sin(static_cast<double>(angle))) * d.rope_factor;
      }
      for (int64_t h = 0; h < hq; ++h)
        rope_one(qp + (t * hq + h) * qk + d.nope, r, c.data(), s.data(), d.interleave, tmp.data());
      rope_one(kp + t * r, r, c.data(), s.data(), d.interleave, tmp.data());
    }
  });
  return ok_status();
}

Status CpuBackend::mla_kv_write(const Tensor& latent, const Tensor& k_pe, KvCache& cache,
                                const AttnSpec& spec) {
  if (!have_step_) return shape_error("mla_kv_write", "called before begin_step");
  const MlaDims& d = spec.mla;
  const int64_t n = static_cast<int64_t>(step_.slots.size()), L = d.kv_lora, r = d.rope, row = d.latent();
  if (latent.numel() != n * L || k_pe.numel() != n * r || latent.dtype != DType::f32 ||
      k_pe.dtype != DType::f32)
    return shape_error("mla_kv_write", "latent " + describe(latent) + ", k_pe " + describe(k_pe) + " for " +
                                           std::to_string(n) + " tokens of kv_lora " + std::to_string(L) +
                                           " + rope " + std::to_string(r));
  SPK_TRY(check_latent_cache("mla_kv_write", cache.k, row, step_.block_size));
  const int64_t capacity = cache.k.dim(0) * step_.block_size;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t slot = step_.slots[t];
    if (slot < 0 || slot >= capacity)
      return shape_error("mla_kv_write", "slot " + std::to_string(slot) + " of token " + std::to_string(t) +
                                             " outside the pool of " + std::to_string(capacity) + " slots");
    float* dst = cache.k.ptr<float>() + slot * row;
    std::memcpy(dst, latent.ptr<const float>() + t * L, L * sizeof(float));
    std::memcpy(dst + L, k_pe.ptr<const float>() + t * r, r * sizeof(float));
  }
  return ok_status();
}

Status CpuBackend::mla_attention(const Tensor& q, const KvCache& cache, const Tensor& kv_b,
                                 const AttnSpec& spec, Tensor& out) {
  if (!have_step_) return shape_error("mla_attention", "called before begin_step");
  const MlaDims& d = spec.mla;
  const int64_t n = static_cast<int64_t>(step_.positions.size()), L = d.kv_lora, nope = d.nope, r = d.rope,
                V = d.v, qk = d.qk(), row = d.latent();
  if (q.rank() != 3 || q.dtype != DType::f32 || q.dim(0) != n || q.dim(2) != qk || out.dtype != DType::f32 ||
      out.numel() != q.dim(0) * q.dim(1) * V || kv_b.dtype != DType::f32 ||
      kv_b.shape != std::vector<int64_t>{q.dim(1) * (nope + V), L})
    return shape_error("mla_attention",
                       "q " + describe(q) + ", kv_b " + describe(kv_b) + ", out " + describe(out) + " for " +
                           std::to_string(n) + " tokens, dims nope " + std::to_string(nope) + " rope " +
                           std::to_string(r) + " v " + std::to_string(V) + " kv_lora " + std::to_string(L));
  SPK_TRY(check_latent_cache("mla_attention", cache.k, row, step_.block_size));
  const int64_t hq = q.dim(1), bs = step_.block_size, num_blocks = cache.k.dim(0);
  for (int32_t b : step_.block_tables)
    if (b < 0 || b >= num_blocks)
      return shape_error("mla_attention", "block id " + std::to_string(b) + " outside the pool of " +
                                              std::to_string(num_blocks) + " blocks");
  const float* W = kv_b.ptr<const float>();  // head h: W_uk rows [h*(nope+V), +nope), W_uv the next V rows
  const float* kc = cache.k.ptr<const float>();
  const float* qp = q.ptr<const float>();
  float* op = out.ptr<float>();
  for (const SeqMeta& seq : step_.seqs) {
    if (seq.q_len == 0) continue;
    const int32_t* table = step_.block_tables.data() + seq.bt_offset;
    auto cached = [&](int64_t j) { return kc + (static_cast<int64_t>(table[j / bs]) * bs + j % bs) * row; };
    const bool absorbed = d.path == MlaPath::absorbed || (d.path == MlaPath::automatic && seq.q_len == 1);
    // Reference: this sequence's keys (nope part) and values, [ctx, hq, nope + V], up-projected once.
    std::vector<float> kv;
    if (!absorbed) {
      kv.assign(static_cast<size_t>(seq.ctx_len) * hq * (nope + V), 0.0f);
      pool_.parallel_for(seq.ctx_len, 1, [&](int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) {
          const float* c = cached(j);
          float* dst = kv.data() + j * hq * (nope + V);
          for (int64_t o = 0; o < hq * (nope + V); ++o) {
            const float* w = W + o * L;
            float acc = 0;
            for (int64_t i = 0; i < L; ++i) acc += w[i] * c[i];
            dst[o] = acc;
          }
        }
      });
    }
    pool_.parallel_for(int64_t{seq.q_len} * hq, 1, [&](int64_t w0, int64_t w1) {
      std::vector<float> scores, qlat(L), acc(std::max(L, V));
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t t = seq.q_start + w / hq, h = w % hq;
        const float* qv = qp + (t * hq + h) * qk;
        const float* Wk = W + h * (nope + V) * L;
        const float* Wv = Wk + nope * L;
        float* o = op + (t * hq + h) * V;
        const int64_t end = std::min<int64_t>(step_.positions[t] + 1, seq.ctx_len);
        scores.resize(static_cast<size_t>(std::max<int64_t>(end, 0)));
        if (absorbed) {  // qlat = W_uk^T q_nope
          std::fill(qlat.begin(), qlat.end(), 0.0f);
          for (int64_t a = 0; a < nope; ++a)
            for (int64_t i = 0; i < L; ++i) qlat[i] += qv[a] * Wk[a * L + i];
        }
        float mx = -INFINITY;
        for (int64_t j = 0; j < end; ++j) {
          const float* c = cached(j);
          float dot = 0;
          if (absorbed) {
            for (int64_t i = 0; i < L; ++i) dot += qlat[i] * c[i];
          } else {
            const float* k = kv.data() + (j * hq + h) * (nope + V);
            for (int64_t a = 0; a < nope; ++a) dot += qv[a] * k[a];
          }
          for (int64_t i = 0; i < r; ++i) dot += qv[nope + i] * c[L + i];
          scores[j] = dot * spec.scale;
          mx = std::max(mx, scores[j]);
        }
        float sum = 0;
        for (float& x : scores) sum += (x = std::exp(x - mx));
        const float inv = sum > 0 ? 1.0f / sum : 0.0f;
        const int64_t width = absorbed ? L : V;
        std::fill(acc.begin(), acc.begin() + width, 0.0f);
        for (int64_t j = 0; j < end; ++j) {
          const float* src = absorbed ? cached(j) : kv.data() + (j * hq + h) * (nope + V) + nope;
          for (int64_t i = 0; i < width; ++i) acc[i] += scores[j] * src[i];
        }
        if (absorbed) {  // out = W_uv . o_lat
          for (int64_t b = 0; b < V; ++b) {
            float x = 0;
            for (int64_t i = 0; i < L; ++i) x += Wv[b * L + i] * acc[i];
            o[b] = x * inv;
          }
        } else {
          for (int64_t b = 0; b < V; ++b) o[b] = acc[b] * inv;
        }
      }
    });
  }
  return ok_status();
}

}  // namespace spk::cpu
