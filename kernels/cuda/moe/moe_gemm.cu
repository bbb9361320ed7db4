// Tensor-core steps of the expert-major MoE FFN (moe_ffn.h): for prefill and large batches, where each
// active expert sees many tokens and the GEMV's per-row dot products become compute-bound on the CUDA
// cores. Per planned 64-row tile of one expert (moe_plan.h):
//   gate/up: hb[rows] = bf16(silu(xb . gate_e^T) * (xb . up_e^T))   64 x 64 output tile per block
//   down:    y[slots] = hb[rows] . down_e^T                          scattered back to slot order
// bf16 operands (x and h rounded once, as the dense prefill GEMM does), fp32 accumulation, WMMA 16x16x16
// fragments, 4 warps of 32 x 32 each, K staged through shared memory 32 at a time. A row's result
// depends only on that row, so the tiles' composition (which tokens share a tile) never changes it.
#include <mma.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/moe/moe_ffn.h"

namespace spk::cuda::moe {
namespace {

namespace wm = nvcuda::wmma;

constexpr int kTM = kTileRows, kTN = 64, kTK = 32,
              kLd = kTK + 8;  // +8: rows stay 16 B aligned, fewer conflicts
constexpr int kThreads = 128;
using FragA = wm::fragment<wm::matrix_a, 16, 16, 16, bf16, wm::row_major>;
using FragB = wm::fragment<wm::matrix_b, 16, 16, 16, bf16, wm::col_major>;
using FragC = wm::fragment<wm::accumulator, 16, 16, 16, float>;

// xb[pos] = bf16(x[token of order[pos]]) for every planned position.
__global__ void gather_kernel(const float* __restrict__ x, int k, int d, Plan p) {
  const int na = *p.n_active;
  if (na == 0) return;
  const int total = p.act_off[na - 1] + p.act_cnt[na - 1];
  for (int pos = blockIdx.x; pos < total; pos += gridDim.x) {
    const float* src = x + static_cast<size_t>(p.order[pos] / k) * d;
    bf16* dst = p.xb + static_cast<size_t>(pos) * d;
    for (int i = threadIdx.x; i < d; i += blockDim.x) dst[i] = __float2bfloat16(src[i]);
  }
}

// rows [0, 64) x cols [0, 32) of a row-major bf16 matrix (leading dim ld, valid rows/cols) -> s[64][kLd].
// cols is a multiple of 8, so each 16-byte chunk is wholly inside or wholly outside.
__device__ __forceinline__ void stage(bf16* s, const bf16* g, size_t ld, int rows, int cols, int k0) {
  for (int c = threadIdx.x; c < kTM * (kTK / 8); c += kThreads) {
    const int r = c / (kTK / 8), q = (c % (kTK / 8)) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < rows && k0 + q < cols) v = *reinterpret_cast<const uint4*>(g + r * ld + k0 + q);
    *reinterpret_cast<uint4*>(s + r * kLd + q) = v;
  }
}

struct Tile {
  int e, off, row0, rows;
};
__device__ __forceinline__ bool tile_of(const Plan& p, Tile& t) {
  if (static_cast<int>(blockIdx.y) >= *p.n_tiles) return false;
  const int a = p.tile_act[blockIdx.y];
  t.e = p.act_expert[a];
  t.off = p.act_off[a];
  t.row0 = p.tile_row0[blockIdx.y];
  t.rows = min(kTM, p.act_cnt[a] - t.row0);
  return true;
}

// acc[i][j] += A(rows wm*32 + 16i) . B(cols wn*32 + 16j) over one staged K chunk.
template <int NB>
__device__ __forceinline__ void mma_chunk(const bf16* As, bf16* const (&Bs)[NB], int wm_, int wn_,
                                          FragC (&acc)[NB][2][2]) {
#pragma unroll
  for (int kk = 0; kk < kTK; kk += 16) {
    FragA a[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) wm::load_matrix_sync(a[i], As + (wm_ * 32 + 16 * i) * kLd + kk, kLd);
#pragma unroll
    for (int b = 0; b < NB; ++b)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        FragB f;
        wm::load_matrix_sync(f, Bs[b] + (wn_ * 32 + 16 * j) * kLd + kk, kLd);
#pragma unroll
        for (int i = 0; i < 2; ++i) wm::mma_sync(acc[b][i][j], a[i], f, acc[b][i][j]);
      }
  }
}

// Stores the warp's accumulators of matrix b into C[64][64] (fp32, shared).
template <int NB>
__device__ __forceinline__ void spill(float* C, int b, int wm_, int wn_, FragC (&acc)[NB][2][2]) {
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wm::store_matrix_sync(C + (wm_ * 32 + 16 * i) * kTN + wn_ * 32 + 16 * j, acc[b][i][j], kTN,
                            wm::mem_row_major);
}

constexpr size_t kStageBytes = 3 * kTM * kLd * sizeof(bf16);
constexpr size_t kSpillBytes = 2 * kTM * kTN * sizeof(float);
constexpr size_t kSmem = kStageBytes > kSpillBytes ? kStageBytes : kSpillBytes;

// grid (ceil(max_inter / 64), max_tiles).
__global__ void __launch_bounds__(kThreads)
    gate_up_gemm(const MoeExpert* __restrict__ experts, MoeShape sh, Plan p) {
  Tile t;
  if (!tile_of(p, t)) return;
  const MoeExpert ex = experts[t.e];
  const int n0 = blockIdx.x * kTN;
  if (n0 >= ex.inter) return;
  __shared__ __align__(128) unsigned char smem[kSmem];
  bf16* As = reinterpret_cast<bf16*>(smem);
  bf16* const Bs[2] = {As + kTM * kLd, As + 2 * kTM * kLd};
  const int warp = threadIdx.x >> 5, wm_ = warp >> 1, wn_ = warp & 1;
  FragC acc[2][2][2];
#pragma unroll
  for (int b = 0; b < 2; ++b)
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) wm::fill_fragment(acc[b][i][j], 0.0f);
  const bf16* A = p.xb + static_cast<size_t>(t.off + t.row0) * sh.d;
  const bf16* G = ex.gate + static_cast<size_t>(n0) * sh.d;
  const bf16* U = ex.up + static_cast<size_t>(n0) * sh.d;
  const int nrows = min(kTN, ex.inter - n0);
  for (int k0 = 0; k0 < sh.d; k0 += kTK) {
    stage(As, A, sh.d, t.rows, sh.d, k0);
    stage(Bs[0], G, sh.d, nrows, sh.d, k0);
    stage(Bs[1], U, sh.d, nrows, sh.d, k0);
    __syncthreads();
    mma_chunk<2>(As, Bs, wm_, wn_, acc);
    __syncthreads();
  }
  float* C = reinterpret_cast<float*>(smem);
  spill<2>(C, 0, wm_, wn_, acc);
  spill<2>(C + kTM * kTN, 1, wm_, wn_, acc);
  __syncthreads();
  for (int i = threadIdx.x; i < kTM * kTN; i += kThreads) {
    const int m = i / kTN, c = i % kTN;
    if (m >= t.rows || c >= nrows) continue;
    const float g = C[i], u = C[kTM * kTN + i];
    p.hb[static_cast<size_t>(t.off + t.row0 + m) * sh.max_inter + n0 + c] =
        __float2bfloat16(g / (1.0f + __expf(-g)) * u);
  }
}

// grid (ceil(d / 64), max_tiles).
__global__ void __launch_bounds__(kThreads)
    down_gemm(const MoeExpert* __restrict__ experts, MoeShape sh, Plan p) {
  Tile t;
  if (!tile_of(p, t)) return;
  const MoeExpert ex = experts[t.e];
  const int n0 = blockIdx.x * kTN;
  if (n0 >= sh.d) return;
  __shared__ __align__(128) unsigned char smem[kSmem];
  bf16* As = reinterpret_cast<bf16*>(smem);
  bf16* const Bs[1] = {As + kTM * kLd};
  const int warp = threadIdx.x >> 5, wm_ = warp >> 1, wn_ = warp & 1;
  FragC acc[1][2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wm::fill_fragment(acc[0][i][j], 0.0f);
  const bf16* A = p.hb + static_cast<size_t>(t.off + t.row0) * sh.max_inter;
  const bf16* D = ex.down + static_cast<size_t>(n0) * ex.inter;
  const int nrows = min(kTN, sh.d - n0);
  for (int k0 = 0; k0 < ex.inter; k0 += kTK) {
    stage(As, A, sh.max_inter, t.rows, ex.inter, k0);
    stage(Bs[0], D, ex.inter, nrows, ex.inter, k0);
    __syncthreads();
    mma_chunk<1>(As, Bs, wm_, wn_, acc);
    __syncthreads();
  }
  float* C = reinterpret_cast<float*>(smem);
  spill<1>(C, 0, wm_, wn_, acc);
  __syncthreads();
  for (int i = threadIdx.x; i < kTM * kTN; i += kThreads) {
    const int m = i / kTN, c = i % kTN;
    if (m >= t.rows || c >= nrows) continue;
    p.y[static_cast<size_t>(p.order[t.off + t.row0 + m]) * sh.d + n0 + c] = C[i];
  }
}

}  // namespace

Status gemm_gate_up_down(const MoeExpert* experts, const MoeShape& sh, const float* x, int n, int k,
                         const Plan& p, cudaStream_t s) {
  const int nk = n * k, T = max_tiles(nk, sh.n_experts);
  gather_kernel<<<min(nk, 1024), 256, 0, s>>>(x, k, sh.d, p);
  SPK_CUDA_CHECK(cudaGetLastError());
  gate_up_gemm<<<dim3((sh.max_inter + kTN - 1) / kTN, T), kThreads, 0, s>>>(experts, sh, p);
  SPK_CUDA_CHECK(cudaGetLastError());
  down_gemm<<<dim3((sh.d + kTN - 1) / kTN, T), kThreads, 0, s>>>(experts, sh, p);
  SPK_CUDA_CHECK(cudaGetLastError());
  return ok_status();
}

}  // namespace spk::cuda::moe
