// Token sampling on the device: one block per logits row, so only the chosen id (and its logprob)
// comes back to the host. Same semantics as runtime/sampler (Sampler::sample without penalties):
// NaN -> -inf; greedy = argmax (ties to the lowest id); else temperature, top-k on logits, softmax over
// the survivors, top-p (smallest descending prefix reaching top_p), min-p, one draw u * mass walked in
// the host sampler's order (descending when top-k/top-p sorted the candidates, else id order).
//
// Candidates: top-k and top-p/min-p need the most likely tokens in descending order. A 4-pass radix
// select (8 bits a pass, 256-bin histograms in shared memory) finds the C-th largest key, one ordered
// pass collects the C candidates (ties at the threshold to the lowest ids), a bitonic sort orders them.
// C <= kMaxCand. Rows the device cannot decide exactly (top_k > kMaxCand, or a top-p / min-p cut that
// lies outside the kMaxCand most likely tokens) are flagged `host` and finished by the host sampler.
//
// Napkin math: a row is 128256 floats (513 KB, read from L2 after the lm_head wrote it); greedy reads it
// once, top-k/top-p about 6 times: ~10-30 us per row, rows in parallel; against ~3.6 ms per step.
#include <cfloat>
#include <climits>
#include <cstdint>

#include "kernels/cuda/sample/argmax_key.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.h"

namespace spk::cuda {
namespace {

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;

template <class T>
__device__ T block_reduce(T v, T* scratch, bool is_max) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) {
    const T w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? (w > v ? w : v) : v + w;
  }
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[lane];
  for (int o = 16; o > 0; o >>= 1) {
    const T w = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? (w > v ? w : v) : v + w;
  }
  return v;  // valid in every thread
}

struct Shared {
  unsigned long long
      cand[kMaxSampleCandidates];  // (~key << 32 | id): ascending = descending value, lowest id
  float prob[kMaxSampleCandidates];
  uint32_t hist[256];
  double dscratch[kWarps];
  float fscratch[kWarps];
  int iscratch[kWarps];
  int wcount[kWarps];
  int n_cand, taken_eq, chosen;
  uint32_t prefix, mask;
  int remaining;
  int keep;
};

// Sorts s.cand[0, n) ascending (n <= kMaxSampleCandidates; padded with ~0 to the next power of two).
__device__ void bitonic_sort(unsigned long long* a, int n) {
  int size = 1;
  while (size < n) size <<= 1;
  for (int i = n + threadIdx.x; i < size; i += kThreads) a[i] = ~0ull;
  __syncthreads();
  for (int k = 2; k <= size; k <<= 1) {
    for (int j = k >> 1; j > 0; j >>= 1) {
      for (int i = threadIdx.x; i < size; i += kThreads) {
        const int l = i ^ j;
        if (l > i) {
          const bool up = (i & k) == 0;
          const unsigned long long x = a[i], y = a[l];
          if ((x > y) == up) {
            a[i] = y;
            a[l] = x;
          }
        }
      }
      __syncthreads();
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(const float* __restrict__ logits, int vocab, const DeviceSampleRow* __restrict__ params,
                  DeviceSampleOut* __restrict__ out, unsigned long long* __restrict__ slots) {
  __shared__ Shared s;
  const int row = blockIdx.x, tid = threadIdx.x;
  const float* L = logits + static_cast<int64_t>(row) * vocab;
  const DeviceSampleRow p = params[row];  // written before the step: read before the wait
  DeviceSampleOut* o = out + row;
  pdl_begin();
  if (slots) {  // the lm_head GEMV left this row's argmax in its slots: take it (greedy) and clear them
    static_assert(kArgmaxSlots == 32, "one slot per lane of warp 0");
    const bool greedy = !p.host && !p.want_logprob && (p.temperature == 0.0f || p.top_k == 1);
    if (tid < 32) {
      unsigned long long* slot = slots + static_cast<int64_t>(row) * kArgmaxSlots + tid;
      unsigned long long k = *slot;
      *slot = 0;
      for (int off = 16; off > 0; off >>= 1) k = max(k, __shfl_xor_sync(0xffffffffu, k, off));
      if (tid == 0) {
        s.chosen = greedy && k != 0;
        if (s.chosen) *o = DeviceSampleOut{argmax_key_id(k), 0.0f, 0, 0};
      }
    }
    __syncthreads();
    if (s.chosen) return;
  }
  if (p.host) {
    if (tid == 0) *o = DeviceSampleOut{-1, 0.0f, 1, 0};
    return;
  }

  // Pass 1: max, argmax (lowest id on ties), count of finite logits.
  float best = -INFINITY;
  int idx = INT_MAX, n_fin = 0;
  // Eight loads in flight per thread, float4 where the row allows (the row comes from L2 and one block's
  // loop was latency-bound), visited in increasing id order, so a thread's first maximum is its lowest id.
  constexpr int kInFlight = 8;
  int vec_end = 0;  // [0, vec_end) is scanned as float4 (4x the bytes in flight) when the row is aligned
  if ((vocab & 3) == 0 && (reinterpret_cast<uintptr_t>(L) & 15) == 0) {
    vec_end = vocab;
    const float4* L4 = reinterpret_cast<const float4*>(L);
    for (int base = tid; base < vocab / 4; base += kInFlight * kThreads) {
      float4 v[kInFlight];
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const int j = base + u * kThreads;
        v[u] = j < vocab / 4 ? L4[j] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
      }
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const int i = 4 * (base + u * kThreads);
        const float e[4] = {nan_as_neg_inf(v[u].x), nan_as_neg_inf(v[u].y), nan_as_neg_inf(v[u].z),
                            nan_as_neg_inf(v[u].w)};
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          if (e[c] > best) best = e[c], idx = i + c;
          n_fin += e[c] != -INFINITY;
        }
      }
    }
  }
  for (int base = vec_end + tid; base < vocab; base += kInFlight * kThreads) {
    float v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int i = base + u * kThreads;
      v[u] = i < vocab ? nan_as_neg_inf(L[i]) : -INFINITY;
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      if (v[u] > best) best = v[u], idx = base + u * kThreads;
      n_fin += v[u] != -INFINITY;
    }
  }
  for (int off = 16; off > 0; off >>= 1) {
    const float ob = __shfl_xor_sync(0xffffffffu, best, off);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, off);
    if (ob > best || (ob == best && oi < idx)) best = ob, idx = oi;
  }
  if ((tid & 31) == 0) s.fscratch[tid >> 5] = best, s.iscratch[tid >> 5] = idx;
  __syncthreads();
  if (tid < 32) {
    best = s.fscratch[tid], idx = s.iscratch[tid];
    for (int off = 16; off > 0; off >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, off);
      const int oi = __shfl_xor_sync(0xffffffffu, idx, off);
      if (ob > best || (ob == best && oi < idx)) best = ob, idx = oi;
    }
    if (tid == 0) s.fscratch[0] = best, s.iscratch[0] = idx;
  }
  __syncthreads();
  const float maxl = s.fscratch[0];
  const int argmax = s.iscratch[0] == INT_MAX ? 0 : s.iscratch[0];
  __syncthreads();
  n_fin = block_reduce<int>(n_fin, s.wcount, false);

  // log-sum-exp at temperature 1 (for logprobs): sum exp(l - max) in double, as the host does.
  double log_s = 0;
  const bool finite_max = isfinite(maxl);
  if (p.want_logprob && finite_max) {
    double acc = 0;
    for (int i = tid; i < vocab; i += kThreads) acc += exp(static_cast<double>(nan_as_neg_inf(L[i]) - maxl));
    log_s = log(block_reduce<double>(acc, s.dscratch, false));
  }
  auto logprob_of = [&](int id) -> float {
    if (!finite_max) return -INFINITY;
    return static_cast<float>(static_cast<double>(nan_as_neg_inf(L[id]) - maxl) - log_s);
  };

  if (p.temperature == 0.0f || !finite_max || p.top_k == 1) {
    if (tid == 0) *o = DeviceSampleOut{argmax, p.want_logprob ? logprob_of(argmax) : 0.0f, 0, 0};
    return;
  }
  const float inv_t = 1.0f / p.temperature;
  auto xval = [&](int i) { return (nan_as_neg_inf(L[i]) - maxl) * inv_t; };

  const bool topk = p.top_k > 0 && p.top_k < n_fin;
  const bool window = !topk && (p.top_p < 1.0f || p.min_p > 0.0f);
  if (topk && p.top_k > kMaxSampleCandidates) {
    if (tid == 0) *o = DeviceSampleOut{-1, 0.0f, 1, 0};
    return;
  }

  // Softmax denominator over every finite token (window and full modes), double like the host.
  double Z = 0;
  if (!topk) {
    double acc = 0;
    for (int i = tid; i < vocab; i += kThreads) {
      const float l = nan_as_neg_inf(L[i]);
      if (l != -INFINITY) acc += static_cast<double>(expf(xval(i)));
    }
    Z = block_reduce<double>(acc, s.dscratch, false);
  }

  if (!topk && !window) {
    // Full mode: walk every finite token in id order; thread t owns a contiguous id range.
    const int per = (vocab + kThreads - 1) / kThreads;
    const int lo = min(vocab, tid * per), hi = min(vocab, lo + per);
    double local = 0;
    int last_fin = -1;
    for (int i = lo; i < hi; ++i) {
      const float l = nan_as_neg_inf(L[i]);
      if (l == -INFINITY) continue;
      local += static_cast<double>(static_cast<float>(static_cast<double>(expf(xval(i))) / Z));
      last_fin = i;
    }
    // Exclusive prefix of `local` over threads (warp scan, then warp totals).
    double incl = local;
    const int lane = tid & 31, warp = tid >> 5;
    for (int off = 1; off < 32; off <<= 1) {
      const double v = __shfl_up_sync(0xffffffffu, incl, off);
      if (lane >= off) incl += v;
    }
    __syncthreads();  // block_reduce above may still be reading dscratch
    if (lane == 31) s.dscratch[warp] = incl;
    if (tid == 0) s.chosen = INT_MAX;
    __syncthreads();
    double before = 0, mass = 0;
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) before += s.dscratch[w];
      mass += s.dscratch[w];
    }
    before += incl - local;
    const int last_any = block_reduce<int>(last_fin, s.wcount, true);
    const double target = p.u * mass;
    if (local > 0 && target < before + local) {
      double cum = before;
      for (int i = lo; i < hi; ++i) {
        const float l = nan_as_neg_inf(L[i]);
        if (l == -INFINITY) continue;
        cum += static_cast<double>(static_cast<float>(static_cast<double>(expf(xval(i))) / Z));
        if (target < cum) {
          atomicMin(&s.chosen, i);
          break;
        }
      }
    }
    __syncthreads();
    if (tid == 0) {
      const int id = s.chosen == INT_MAX ? last_any : s.chosen;
      *o = DeviceSampleOut{id, p.want_logprob ? logprob_of(id) : 0.0f, 0, 0};
    }
    return;
  }

  // Radix select of the C-th largest key among the finite tokens.
  const int C = topk ? p.top_k : min(kMaxSampleCandidates, n_fin);
  if (tid == 0) s.prefix = 0, s.mask = 0, s.remaining = C, s.n_cand = 0, s.taken_eq = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int b = tid; b < 256; b += kThreads) s.hist[b] = 0;
    __syncthreads();
    const uint32_t prefix = s.prefix, mask = s.mask;
    for (int i = tid; i < vocab; i += kThreads) {
      if (nan_as_neg_inf(L[i]) == -INFINITY) continue;
      const uint32_t k = order_key(xval(i));
      if ((k & mask) == prefix) atomicAdd(&s.hist[(k >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (tid == 0) {
      int cum = 0, b = 255;
      for (; b > 0; --b) {
        if (cum + static_cast<int>(s.hist[b]) >= s.remaining) break;
        cum += static_cast<int>(s.hist[b]);
      }
      s.remaining -= cum;  // still to take inside bucket b
      s.prefix |= static_cast<uint32_t>(b) << shift;
      s.mask |= 255u << shift;
    }
    __syncthreads();
  }
  const uint32_t kth = s.prefix;
  const int need_eq = s.remaining;  // how many keys equal to kth to take, lowest ids first
  // Ordered collection: keys above kth, and the first need_eq keys equal to it.
  const int lane = tid & 31, warp = tid >> 5;
  for (int base = 0; base < vocab; base += kThreads) {
    const int i = base + tid;
    bool gt = false, eq = false;
    uint32_t k = 0;
    if (i < vocab && nan_as_neg_inf(L[i]) != -INFINITY) {
      k = order_key(xval(i));
      gt = k > kth;
      eq = k == kth;
    }
    if (gt)
      s.cand[atomicAdd(&s.n_cand, 1)] =
          (static_cast<unsigned long long>(~k) << 32) | static_cast<uint32_t>(i);
    const unsigned bal = __ballot_sync(0xffffffffu, eq);
    if (lane == 0) s.wcount[warp] = __popc(bal);
    __syncthreads();
    int rank = s.taken_eq + __popc(bal & ((1u << lane) - 1u));
    for (int w = 0; w < warp; ++w) rank += s.wcount[w];
    if (eq && rank < need_eq)
      s.cand[atomicAdd(&s.n_cand, 1)] =
          (static_cast<unsigned long long>(~k) << 32) | static_cast<uint32_t>(i);
    __syncthreads();
    if (tid == 0)
      for (int w = 0; w < kWarps; ++w) s.taken_eq += s.wcount[w];
    __syncthreads();
  }
  const int n = s.n_cand;  // == C
  bitonic_sort(s.cand, n);
  // exp of each candidate (softmax numerators), in parallel.
  for (int c = tid; c < n; c += kThreads)
    s.prob[c] = expf(key_value(~static_cast<uint32_t>(s.cand[c] >> 32)));
  __syncthreads();
  if (tid != 0) return;

  // The rest walks <= kMaxSampleCandidates entries in the host sampler's order, on one thread.
  if (topk) {
    double sum = 0;
    for (int c = 0; c < n; ++c) sum += static_cast<double>(s.prob[c]);
    Z = sum;
  }
  for (int c = 0; c < n; ++c) s.prob[c] = static_cast<float>(static_cast<double>(s.prob[c]) / Z);
  const bool all_in = topk || n >= n_fin;  // the candidates are every survivor of top-k
  int keep = n;
  bool sorted = topk;
  if (p.top_p < 1.0f) {
    sorted = true;
    double cum = 0;
    keep = 0;
    while (keep < n && (keep == 0 || cum < p.top_p)) cum += s.prob[keep++];
    if (cum < p.top_p && !all_in) {  // the cut lies beyond the window
      *o = DeviceSampleOut{-1, 0.0f, 1, 0};
      return;
    }
  }
  if (p.min_p > 0.0f) {
    const float floor_p = p.min_p * s.prob[0];  // candidates sorted: prob[0] is the top probability
    int k2 = 0;
    while (k2 < keep && s.prob[k2] >= floor_p) ++k2;
    if (k2 == keep && p.top_p >= 1.0f && !all_in) {  // survivors may continue beyond the window
      *o = DeviceSampleOut{-1, 0.0f, 1, 0};
      return;
    }
    keep = k2;
  }
  // Draw order: descending when sorted (top-k / top-p), else id order (min-p alone).
  if (!sorted) {
    // Insertion sort of the survivors by id (few at a min-p cut; bounded by kMaxSampleCandidates).
    for (int a = 1; a < keep; ++a) {
      const unsigned long long c = s.cand[a];
      const float pr = s.prob[a];
      int b = a - 1;
      while (b >= 0 && static_cast<uint32_t>(s.cand[b]) > static_cast<uint32_t>(c)) {
        s.cand[b + 1] = s.cand[b];
        s.prob[b + 1] = s.prob[b];
        --b;
      }
      s.cand[b + 1] = c;
      s.prob[b + 1] = pr;
    }
  }
  double mass = 0;
  for (int c = 0; c < keep; ++c) mass += s.prob[c];
  const double target = p.u * mass;
  double cum = 0;
  int id = static_cast<int>(static_cast<uint32_t>(s.cand[keep - 1]));
  for (int c = 0; c < keep; ++c) {
    cum += s.prob[c];
    if (target < cum) {
      id = static_cast<int>(static_cast<uint32_t>(s.cand[c]));
      break;
    }
  }
  *o = DeviceSampleOut{id, p.want_logprob ? logprob_of(id) : 0.0f, 0, 0};
}

}  // namespace

Status sample_rows(const float* logits, int rows, int vocab, const DeviceSampleRow* params,
                   DeviceSampleOut* out, cudaStream_t s, unsigned long long* argmax_slots) {
  if (rows == 0) return ok_status();
  SPK_LAUNCH(sample_kernel, rows, kThreads, 0, s, logits, vocab, params, out, argmax_slots);
  return ok_status();
}

}  // namespace spk::cuda
