// bf16-weight GEMV for decode batches of 1..8: y[b, n] = x[b, :] . W[n, :] (+ bias[n]).
//
// Napkin math: batch-1 decode of an 8B model reads ~15 GB of weights per token; at ~4.2 TB/s that is
// ~3.6 ms/token (~280 tok/s). The GEMV must therefore stream W at close to copy bandwidth: every W byte
// is read exactly once with 16-byte loads, coalesced across the block, with several loads in flight per
// thread. x (fp32, K*batch*4 bytes: 16-128 KB) is re-read through L1/L2 and is not the limit while a
// block computes R rows per W load of x (x traffic per W byte = 4*B/R).
//
// Layout: a block of 256 threads computes groups of R rows in turn. Thread t walks the 8-element chunks
// t, t+256, ... of the K axis for all R rows and all B batch rows, two chunks in flight, then the block
// reduces the R*B partial sums while the next group's first chunks load.
//
// Fusions (GemvFusion), each removing a small kernel of the decode step:
//  - norm: x is the un-normalised residual; y = W . (x * w_norm) * rsqrt(mean(x^2) + eps). Every block
//    reads all of x anyway, so the sum of squares comes free with the dot products; block 0 also writes
//    the normalised x (norm_out), as the separate rmsnorm would have.
//  - accum: accum[b, n] += y[b, n] (the o/down projection adding into the residual stream).
//  - swiglu: gate and up (segments 0 and 1) computed by the same block, row for row, and
//    out = silu(gate) * up formed in the epilogue; gate and up are still written.
//  - argmax: the lm_head's greedy pick; each block atomicMax'es the best of its rows per batch row into one
//    of kArgmaxSlots slots (spread so that ~32k blocks do not queue on one address), and the sampler reads
//    32 slots instead of scanning 128k logits (~10 us of the batch-1 step).
#include <cuda_bf16.h>

#include <cstdlib>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/linear/bf16_dot.cuh"
#include "kernels/cuda/sample/argmax_key.cuh"
#include "kernels/knobs.h"

namespace spk::cuda {
namespace {

constexpr int kThreads = 256;

// Up to kGemvMaxGroup weights that share x (q/k/v, gate/up) in one launch: segment i owns the row groups
// [first_group[i], first_group[i + 1]).
struct Group {
  const bf16* W[kGemvMaxGroup];
  const float* bias[kGemvMaxGroup];
  float* y[kGemvMaxGroup];
  int N[kGemvMaxGroup];
  int first_group[kGemvMaxGroup];
  int n;
  GemvFusion f;
};

__device__ __forceinline__ float4 mul4(float4 a, float4 b) {
  return make_float4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w);
}
__device__ __forceinline__ float sq4(float4 a, float s) {
  return fmaf(a.x, a.x, fmaf(a.y, a.y, fmaf(a.z, a.z, fmaf(a.w, a.w, s))));
}

template <int B, int R, bool SWIGLU, bool NORM>
__global__ void __launch_bounds__(kThreads)
    gemv_kernel(const Group g, const float* __restrict__ x, int K, int n_groups) {
  constexpr int RT = SWIGLU ? 2 * R : R;       // rows of W per group: R of one weight, or R of gate + R of up
  constexpr int NP = RT * B + (NORM ? B : 0);  // partial sums per thread: dots, then sums of squares
  const int chunks = K / 8;
  const int c0 = threadIdx.x;

  // Group `gi`: R rows of one segment (SwiGLU: one segment of N rows, W[0] = gate, W[1] = up). The segment
  // is chosen by selects, without dynamic indexing into the parameter struct.
  const uint4* Wr[RT];  // row r of the group; tail rows recompute the last row and are never stored
  const float* bias;
  float* y;
  int N, row0;
  auto locate = [&](int gi) {
    const bool s1 = !SWIGLU && g.n > 1 && gi >= g.first_group[1];
    const bool s2 = !SWIGLU && g.n > 2 && gi >= g.first_group[2];
    const bf16* W = s2 ? g.W[2] : s1 ? g.W[1] : g.W[0];
    bias = s2 ? g.bias[2] : s1 ? g.bias[1] : g.bias[0];
    y = s2 ? g.y[2] : s1 ? g.y[1] : g.y[0];
    N = s2 ? g.N[2] : s1 ? g.N[1] : g.N[0];
    row0 = (gi - (s2 ? g.first_group[2] : s1 ? g.first_group[1] : 0)) * R;
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      const bf16* base = SWIGLU && r >= R ? g.W[1] : W;
      Wr[r] = reinterpret_cast<const uint4*>(base) + static_cast<int64_t>(min(row0 + r % R, N - 1)) * chunks;
    }
  };
  auto load = [&](int c, uint4* w) {
#pragma unroll
    for (int r = 0; r < RT; ++r) w[r] = __ldcs(Wr[r] + c);  // streamed once: evict-first
  };
  // Two chunks of W per thread are in flight at any time: the first two of a group are loaded before
  // the previous group's reduction, and the block's first group's before pdl_wait() (the weights do not
  // depend on the previous kernel, so their loads overlap its tail).
  uint4 w[2][RT];
  auto load_first = [&] {
    if (c0 < chunks) load(c0, w[0]);
    if (c0 + kThreads < chunks) load(c0 + kThreads, w[1]);
  };
  int gi = blockIdx.x;
  locate(gi);
  load_first();
  pdl_wait();
  pdl_launch_dependents();

  __shared__ float part[2][kThreads / 32][NP];  // double-buffered: a group's reduction vs the next's
  __shared__ float inv[B];
  __shared__ unsigned long long best[R * B];  // argmax: the keys of this group's outputs
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int it = 0; gi < n_groups; gi += gridDim.x, ++it) {
    float acc[NP];
#pragma unroll
    for (int i = 0; i < NP; ++i) acc[i] = 0.0f;
    for (int c = c0; c < chunks; c += 2 * kThreads) {
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const int cc = c + p * kThreads;
        if (cc >= chunks) break;
        float4 nw0, nw1;
        if constexpr (NORM) {
          const float4* nv = reinterpret_cast<const float4*>(g.f.norm_w) + 2 * cc;
          nw0 = __ldg(nv);
          nw1 = __ldg(nv + 1);
        }
#pragma unroll
        for (int b = 0; b < B; ++b) {
          const float4* xv = reinterpret_cast<const float4*>(x + static_cast<int64_t>(b) * K) + 2 * cc;
          float4 x0 = __ldg(xv), x1 = __ldg(xv + 1);
          if constexpr (NORM) {
            acc[RT * B + b] = sq4(x1, sq4(x0, acc[RT * B + b]));
            x0 = mul4(x0, nw0);
            x1 = mul4(x1, nw1);
          }
#pragma unroll
          for (int r = 0; r < RT; ++r) acc[r * B + b] = dot8(w[p][r], x0, x1, acc[r * B + b]);
        }
        if (cc + 2 * kThreads < chunks) load(cc + 2 * kThreads, w[p]);
      }
    }
    // This group's outputs; then the next group's first loads go out before the reduction.
    const float* const bias_g = bias;
    float* const y_g = y;
    const int N_g = N, row0_g = row0;
    if (gi + gridDim.x < n_groups) {
      locate(gi + gridDim.x);
      load_first();
    }

    float(*pt)[NP] = part[it & 1];
#pragma unroll
    for (int i = 0; i < NP; ++i) {
      float v = acc[i];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0) pt[warp][i] = v;
    }
    __syncthreads();
    auto total = [&](int i) {
      float v = 0.0f;
#pragma unroll
      for (int w8 = 0; w8 < kThreads / 32; ++w8) v += pt[w8][i];
      return v;
    };
    if constexpr (NORM) {
      if (threadIdx.x < B) inv[threadIdx.x] = rsqrtf(total(RT * B + threadIdx.x) / K + g.f.norm_eps);
      __syncthreads();
    }
    for (int i = threadIdx.x; i < R * B; i += kThreads) {
      const int r = i / B, b = i % B;
      const int row = row0_g + r;
      if (row >= N_g) {
        if (g.f.argmax) best[i] = 0;
        continue;
      }
      const float scale = NORM ? inv[b] : 1.0f;
      const float v = total(i) * scale + (bias_g ? bias_g[row] : 0.0f);
      if (g.f.argmax) best[i] = argmax_key(v, row);
      const int64_t at = static_cast<int64_t>(b) * N_g + row;
      y_g[at] = v;
      if (g.f.accum) g.f.accum[at] += v;
      if constexpr (SWIGLU) {
        const float u = total(R * B + i) * scale + (g.bias[1] ? g.bias[1][row] : 0.0f);
        g.y[1][at] = u;
        g.f.swiglu_out[at] = v / (1.0f + expf(-v)) * u;  // silu_mul's formula
      }
    }
    if (g.f.argmax) {  // the best of this group's rows, per batch row
      __syncthreads();
      if (threadIdx.x < B) {
        unsigned long long k = 0;
#pragma unroll
        for (int r = 0; r < R; ++r) k = max(k, best[r * B + threadIdx.x]);
        atomicMax(g.f.argmax + threadIdx.x * kArgmaxSlots + blockIdx.x % kArgmaxSlots, k);
      }
    }
    if constexpr (NORM) {
      if (gi == 0)  // the normalised x, as rmsnorm writes it
        for (int i = threadIdx.x; i < B * K; i += kThreads)
          g.f.norm_out[i] = x[i] * inv[i / K] * g.f.norm_w[i % K];
    }
  }
}

// Blocks for n_groups groups of `kernel`: one per group (SPARKCTL_GEMV_PERSIST=0), or as many as fit on the
// SMs at once, each taking the same number of groups in turn, so the weight stream runs without waves of
// block launches and their ramp-up gaps. 1 (the default): persistent except the batch-1 GEMVs of many
// waves; 2: persistent always (for measuring).
int gemv_persist() {
  static const int mode = [] {
    const int v = knob(Knob::GEMV_PERSIST);
    return v == 0 || v == 2 ? v : 1;
  }();
  return mode;
}

template <int B, int R, bool SWIGLU, bool NORM>
cudaError_t launch(const Group& g, int n_groups, const float* x, int K, cudaStream_t s) {
  static const int slots = [] {
    int dev = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemv_kernel<B, R, SWIGLU, NORM>, kThreads,
                                                      0) != cudaSuccess)
      return 0;
    return sms * per_sm;
  }();
  int blocks = n_groups;
  // At batch 1 the GEMVs of many waves (gate_up: 14, lm_head: 61) stream at copy bandwidth as they are
  // and lost 2-7 % with persistent blocks (H200, ncu); the short ones (qkv, o, down: 2-3 waves) gained.
  const bool many_waves = B == 1 && n_groups > 4 * slots && gemv_persist() != 2;
  if (gemv_persist() && slots > 0 && n_groups > slots && !many_waves) {
    const int per_block = (n_groups + slots - 1) / slots;
    blocks = (n_groups + per_block - 1) / per_block;
  }
  return launch_kernel(gemv_kernel<B, R, SWIGLU, NORM>, blocks, kThreads, 0, s, g, x, K, n_groups);
}

template <int B, int R>
cudaError_t launch_r(const GemvSegment* segs, int n, const float* x, int K, const GemvFusion& f,
                     cudaStream_t s) {
  Group g{};
  g.n = n;
  g.f = f;
  int groups = 0;
  for (int i = 0; i < n; ++i) {
    g.W[i] = segs[i].W;
    g.bias[i] = segs[i].bias;
    g.y[i] = segs[i].y;
    g.N[i] = segs[i].N;
    g.first_group[i] = groups;
    if (!f.swiglu_out || i == 0) groups += (segs[i].N + R - 1) / R;  // swiglu: one group per R row pairs
  }
  const bool sw = f.swiglu_out != nullptr, nm = f.norm_w != nullptr;
  if (sw && nm) return launch<B, R, true, true>(g, groups, x, K, s);
  if (sw) return launch<B, R, true, false>(g, groups, x, K, s);
  if (nm) return launch<B, R, false, true>(g, groups, x, K, s);
  return launch<B, R, false, false>(g, groups, x, K, s);
}

// Rows per block: more rows cut x re-reads per W byte (x traffic per W byte = 4*B/R); fewer keep more
// blocks to fill the SMs. 4 at every batch for the plain GEMVs: on the H200 (bench_cuda_kernels) batch-1
// GEMVs take 3546 us per 8B step with 4 rows vs 3665 with 2 (qkv 89.6 vs 86.4 % of copy bandwidth, o 80.4
// vs 77.8, down 99.5 vs 91.3); batch 2 3942 vs 4267 us. SPARKCTL_GEMV_ROWS=2 takes 2 at batches 1-2.
//
// gate/up (swiglu) at batch 1 takes 2 rows of each: in the step's timeline (CUPTI) it added 53.2 us a
// layer with 2 against 61.5 with 4 (235 MB: 54.9 us at copy bandwidth), while the plain GEMVs lost with
// 2. Its 4-row kernel holds 2 x 8 rows of 16-byte loads per thread, 128 registers, so only 2 blocks fit
// on an SM; with 2 rows, 4 fit. SPARKCTL_GEMV_SWIGLU_ROWS=4 (or 2) sets it at batches 1-2, for measuring.
int small_batch_rows() {
  static const int r = [] { return knob(Knob::GEMV_ROWS) == 2 ? 2 : 4; }();
  return r;
}
int swiglu_rows(int batch) {
  static const int r = [] {
    const int v = knob(Knob::GEMV_SWIGLU_ROWS);
    return v == 2 || v == 4 ? v : 0;
  }();
  return r ? r : batch == 1 ? 2 : small_batch_rows();
}

template <int B>
cudaError_t launch_b(const GemvSegment* segs, int n, const float* x, int K, const GemvFusion& f,
                     cudaStream_t s) {
  if constexpr (B <= 2) {
    const int rows = f.swiglu_out ? swiglu_rows(B) : small_batch_rows();
    if (rows == 2) return launch_r<B, 2>(segs, n, x, K, f, s);
  }
  return launch_r<B, 4>(segs, n, x, K, f, s);
}

}  // namespace

Status gemv_bf16(const bf16* W, const float* bias, const float* x, int batch, int N, int K, float* y,
                 cudaStream_t s) {
  const GemvSegment seg{W, bias, y, N};
  return gemv_bf16_fused(&seg, 1, x, batch, K, GemvFusion{}, s);
}

Status gemv_bf16_group(const GemvSegment* segs, int n, const float* x, int batch, int K, cudaStream_t s) {
  return gemv_bf16_fused(segs, n, x, batch, K, GemvFusion{}, s);
}

Status gemv_bf16_fused(const GemvSegment* segs, int n, const float* x, int batch, int K, const GemvFusion& f,
                       cudaStream_t s) {
  if (n < 1 || n > kGemvMaxGroup)
    return make_error("gemv_bf16: " + std::to_string(n) + " weights",
                      "group 1.." + std::to_string(kGemvMaxGroup));
  for (int i = 0; i < n; ++i)
    if (segs[i].N < 1) return make_error("gemv_bf16: weight " + std::to_string(i) + " has N=0");
  if (K % 8 != 0)
    return make_error("gemv_bf16: K=" + std::to_string(K) + " is not a multiple of 8",
                      "use the GEMM path for this shape");
  if (batch < 1 || batch > kGemvMaxBatch)
    return make_error("gemv_bf16: batch " + std::to_string(batch) + " outside 1..8", "use the GEMM path");
  if (f.swiglu_out && (n != 2 || segs[0].N != segs[1].N))
    return make_error("gemv_bf16: swiglu needs gate and up of equal rows (got " + std::to_string(n) +
                      " weights)");
  if (f.accum && n != 1) return make_error("gemv_bf16: accum needs exactly one weight");
  if (f.argmax && n != 1) return make_error("gemv_bf16: argmax needs exactly one weight");
  if (f.norm_w && !f.norm_out) return make_error("gemv_bf16: norm needs norm_out");
  switch (batch) {
    case 1:
      SPK_CUDA_CHECK(launch_b<1>(segs, n, x, K, f, s));
      break;
    case 2:
      SPK_CUDA_CHECK(launch_b<2>(segs, n, x, K, f, s));
      break;
    case 3:
      SPK_CUDA_CHECK(launch_b<3>(segs, n, x, K, f, s));
      break;
    case 4:
      SPK_CUDA_CHECK(launch_b<4>(segs, n, x, K, f, s));
      break;
    case 5:
      SPK_CUDA_CHECK(launch_b<5>(segs, n, x, K, f, s));
      break;
    case 6:
      SPK_CUDA_CHECK(launch_b<6>(segs, n, x, K, f, s));
      break;
    case 7:
      SPK_CUDA_CHECK(launch_b<7>(segs, n, x, K, f, s));
      break;
    default:
      SPK_CUDA_CHECK(launch_b<8>(segs, n, x, K, f, s));
      break;
  }
  return ok_status();
}

}  // namespace spk::cuda
