// bf16-weight GEMV for decode batches of 1..8: y[b, n] = x[b, :] . W[n, :] (+ bias[n]).
//
// Napkin math: batch-1 decode of an 8B model reads ~15 GB of weights per token; at ~4.2 TB/s that is
// ~3.6 ms/token (~280 tok/s). The GEMV must therefore stream W at close to copy bandwidth: every W byte
// is read exactly once with 16-byte loads, coalesced across the block, with several loads in flight per
// thread. x (fp32, K*batch*4 bytes: 16-128 KB) is re-read through L1/L2 and is not the limit while a
// block computes R rows per W load of x (x traffic per W byte = 4*B/R).
//
// Layout: one block of 256 threads computes R rows. Thread t walks the 8-element chunks t, t+256, ...
// of the K axis for all R rows and all B batch rows, then the block reduces the R*B partial sums.
#include <cuda_bf16.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_ops.h"

namespace spk::cuda {
namespace {

constexpr int kThreads = 256;

// Up to kGemvMaxGroup weights that share x (q/k/v, gate/up) in one launch: segment i owns blocks
// [first_block[i], first_block[i + 1]).
struct Group {
  const bf16* W[kGemvMaxGroup];
  const float* bias[kGemvMaxGroup];
  float* y[kGemvMaxGroup];
  int N[kGemvMaxGroup];
  int first_block[kGemvMaxGroup];
  int n;
};

template <int B, int R>
__global__ void __launch_bounds__(kThreads) gemv_kernel(const Group g, const float* __restrict__ x, int K) {
  // Segment of this block (selects, no dynamic indexing into the parameter struct).
  const int blk = blockIdx.x;
  const bool s1 = g.n > 1 && blk >= g.first_block[1], s2 = g.n > 2 && blk >= g.first_block[2];
  const bf16* __restrict__ W = s2 ? g.W[2] : s1 ? g.W[1] : g.W[0];
  const float* __restrict__ bias = s2 ? g.bias[2] : s1 ? g.bias[1] : g.bias[0];
  float* __restrict__ y = s2 ? g.y[2] : s1 ? g.y[1] : g.y[0];
  const int N = s2 ? g.N[2] : s1 ? g.N[1] : g.N[0];
  const int row0 = (blk - (s2 ? g.first_block[2] : s1 ? g.first_block[1] : 0)) * R;
  const int chunks = K / 8;
  float acc[R][B];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int b = 0; b < B; ++b) acc[r][b] = 0.0f;

  const uint4* Wv = reinterpret_cast<const uint4*>(W);
#pragma unroll 2
  for (int c = threadIdx.x; c < chunks; c += kThreads) {
    uint4 w[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int row = min(row0 + r, N - 1);  // tail rows recompute the last row; never stored
      w[r] = __ldcs(Wv + static_cast<int64_t>(row) * chunks + c);  // streamed once: evict-first
    }
#pragma unroll
    for (int b = 0; b < B; ++b) {
      const float4* xv = reinterpret_cast<const float4*>(x + static_cast<int64_t>(b) * K) + 2 * c;
      const float4 x0 = __ldg(xv), x1 = __ldg(xv + 1);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&w[r]);
        const float2 w0 = __bfloat1622float2(h[0]), w1 = __bfloat1622float2(h[1]);
        const float2 w2 = __bfloat1622float2(h[2]), w3 = __bfloat1622float2(h[3]);
        float a = acc[r][b];
        a = fmaf(w0.x, x0.x, a);
        a = fmaf(w0.y, x0.y, a);
        a = fmaf(w1.x, x0.z, a);
        a = fmaf(w1.y, x0.w, a);
        a = fmaf(w2.x, x1.x, a);
        a = fmaf(w2.y, x1.y, a);
        a = fmaf(w3.x, x1.z, a);
        a = fmaf(w3.y, x1.w, a);
        acc[r][b] = a;
      }
    }
  }

  __shared__ float part[kThreads / 32][R * B];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int b = 0; b < B; ++b) {
      float v = acc[r][b];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == 0) part[warp][r * B + b] = v;
    }
  __syncthreads();
  for (int i = threadIdx.x; i < R * B; i += kThreads) {
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) v += part[w][i];
    const int r = i / B, b = i % B;
    const int row = row0 + r;
    if (row < N) y[static_cast<int64_t>(b) * N + row] = v + (bias ? bias[row] : 0.0f);
  }
}

template <int B>
void launch(const GemvSegment* segs, int n, const float* x, int K, cudaStream_t s) {
  // More rows per block cut x re-reads at larger batch; small N keeps R small to fill the SMs.
  constexpr int R = B <= 2 ? 2 : 4;
  Group g{};
  g.n = n;
  int blocks = 0;
  for (int i = 0; i < n; ++i) {
    g.W[i] = segs[i].W;
    g.bias[i] = segs[i].bias;
    g.y[i] = segs[i].y;
    g.N[i] = segs[i].N;
    g.first_block[i] = blocks;
    blocks += (segs[i].N + R - 1) / R;
  }
  gemv_kernel<B, R><<<blocks, kThreads, 0, s>>>(g, x, K);
}

}  // namespace

Status gemv_bf16(const bf16* W, const float* bias, const float* x, int batch, int N, int K, float* y,
                 cudaStream_t s) {
  const GemvSegment seg{W, bias, y, N};
  return gemv_bf16_group(&seg, 1, x, batch, K, s);
}

Status gemv_bf16_group(const GemvSegment* segs, int n, const float* x, int batch, int K, cudaStream_t s) {
  if (n < 1 || n > kGemvMaxGroup)
    return make_error("gemv_bf16_group: " + std::to_string(n) + " weights",
                      "group 1.." + std::to_string(kGemvMaxGroup));
  for (int i = 0; i < n; ++i)
    if (segs[i].N < 1) return make_error("gemv_bf16_group: weight " + std::to_string(i) + " has N=0");
  if (K % 8 != 0)
    return make_error("gemv_bf16: K=" + std::to_string(K) + " is not a multiple of 8",
                      "use the GEMM path for this shape");
  if (batch < 1 || batch > kGemvMaxBatch)
    return make_error("gemv_bf16: batch " + std::to_string(batch) + " outside 1..8", "use the GEMM path");
  switch (batch) {
    case 1:
      launch<1>(segs, n, x, K, s);
      break;
    case 2:
      launch<2>(segs, n, x, K, s);
      break;
    case 3:
      launch<3>(segs, n, x, K, s);
      break;
    case 4:
      launch<4>(segs, n, x, K, s);
      break;
    case 5:
      launch<5>(segs, n, x, K, s);
      break;
    case 6:
      launch<6>(segs, n, x, K, s);
      break;
    case 7:
      launch<7>(segs, n, x, K, s);
      break;
    default:
      launch<8>(segs, n, x, K, s);
      break;
  }
  SPK_CUDA_LAUNCH_CHECK();
  return ok_status();
}

}  // namespace spk::cuda
