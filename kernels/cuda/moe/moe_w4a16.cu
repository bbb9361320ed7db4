// Mixture-of-experts SiLU-GLU FFN with GPTQ int4 experts (Backend::moe_ffn on gptq-int4 experts): the same
// expert-major plan and combine as the bf16 path (moe_ffn.cu, moe_plan.h), with the W4A16 inner loop
// (linear/w4a16_core.cuh) on the checkpoint layout: qweight [K/8, N] with K the expert's input.
//  1. plan; zero the gate, up and y accumulators (the K slices add into them);
//  2. gate/up: block (column block, K slice of d, active expert) loads its slice of the expert's token rows
//     (4 at a time; 1 when a single token routes to it) and adds x . gate and x . up into g and u;
//  3. down: block (column block of d, K slice of inter, active expert) loads silu(g) * u for its slice and
//     adds h . down into y;
//  4. combine: out[t] = sum of w * y over t's slots in ascending expert index (the CPU reference's order).
// Napkin math (Qwen3-30B-A3B-shaped, g128, batch 1): 8 experts x 3 x 768 x 2048 x ~0.53 B = 20 MB a layer,
// 0.96 GB a token over 48 layers (against 3.6 GB bf16): 0.29 ms at 3.35 TB/s. The K split (for the grid to
// fill the SMs with only 8 active experts) makes the per-slot sums order-free across runs (fp32 atomics).
#include <algorithm>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/linear/w4a16_core.cuh"
#include "kernels/cuda/moe/moe_ffn.h"

namespace spk::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kBlockCols = 4 * kThreads;
constexpr int kTok = 4;         // token rows per pass over a weight slice
constexpr int kMaxSlice = 512;  // K rows per block (x slice: kTok * kMaxSlice floats = 8 KiB)
constexpr int kChunk = 4;       // packed rows in flight per load batch

// out[m][c] for the first `nt` rows of xs (MR = 1 when one token routes to the expert, else kTok).
template <int MR>
__device__ __forceinline__ void slice_dot(const W4A16Weight& w, const float* xs, int k0, int k1, int n0,
                                          float (&out)[MR][4]) {
  int4 cur[kChunk];
  w4a16::load_rows(cur, w.qweight + n0, k0 / 8, k1 / 8, w.N);
  w4a16::accumulate<MR, kChunk>(w, xs, kMaxSlice, k0, k1, n0, cur, out);
}

template <int MR>
__device__ __forceinline__ void add_rows(float* dst, int ld, const int* slot, int nt, int n0,
                                         const float (&v)[MR][4]) {
#pragma unroll
  for (int m = 0; m < MR; ++m)
    if (m < nt) {
#pragma unroll
      for (int c = 0; c < 4; ++c) atomicAdd(dst + int64_t(slot[m]) * ld + n0 + c, v[m][c]);
    }
}

// Walks the active expert a's slots kTok at a time: fills xs [kTok][kMaxSlice] with row(slot, kk) for the
// pass's rows m < nt (zeros past them), then, on live threads, calls use(rows, slot, nt) where rows is
// std::integral_constant<int, MR>, MR = 1 when one token is left for the pass, else kTok. Every thread of
// the block must call it.
template <class Row, class Use>
__device__ __forceinline__ void for_each_pass(const moe::Plan& p, int a, int len, bool live, float* xs,
                                              Row row, Use use) {
  const int off = p.act_off[a], cnt = p.act_cnt[a];
  for (int i0 = 0; i0 < cnt; i0 += kTok) {
    const int nt = min(kTok, cnt - i0);
    int slot[kTok];
#pragma unroll
    for (int m = 0; m < kTok; ++m) slot[m] = p.order[off + i0 + min(m, nt - 1)];
    __syncthreads();  // the previous pass is done with xs
    for (int i = threadIdx.x; i < kTok * len; i += kThreads) {
      const int m = i / len, kk = i - m * len;
      xs[m * kMaxSlice + kk] = m < nt ? row(slot[m], kk) : 0.0f;
    }
    __syncthreads();
    if (!live) continue;
    if (nt == 1)
      use(std::integral_constant<int, 1>{}, slot, nt);
    else
      use(std::integral_constant<int, kTok>{}, slot, nt);
  }
}

// grid (ceil(max_inter / 512), ceil(d / slice), max_active).
__global__ void __launch_bounds__(kThreads)
    gate_up_w4a16(const MoeExpertQ* __restrict__ experts, MoeShape sh, const float* __restrict__ x, int k,
                  moe::Plan p, int slice) {
  const int a = blockIdx.z;
  if (a >= *p.n_active) return;
  const MoeExpertQ ex = experts[p.act_expert[a]];
  const int n0 = (blockIdx.x * kThreads + threadIdx.x) * 4;
  if (blockIdx.x * kBlockCols >= ex.inter) return;  // the whole block: before any barrier
  const int k0 = blockIdx.y * slice, k1 = min(sh.d, k0 + slice);
  __shared__ float4 xs4[kTok * kMaxSlice / 4];
  float* xs = reinterpret_cast<float*>(xs4);
  for_each_pass(
      p, a, k1 - k0, n0 < ex.inter, xs,
      [&](int slot, int kk) { return x[int64_t(slot / k) * sh.d + k0 + kk]; },
      [&](auto rows, const int(&slot)[kTok], int nt) {
        constexpr int MR = decltype(rows)::value;
        float g[MR][4] = {}, u[MR][4] = {};
        slice_dot<MR>(ex.gate, xs, k0, k1, n0, g);
        slice_dot<MR>(ex.up, xs, k0, k1, n0, u);
        add_rows<MR>(p.h, sh.max_inter, slot, nt, n0, g);
        add_rows<MR>(p.u, sh.max_inter, slot, nt, n0, u);
      });
}

// grid (ceil(d / 512), ceil(max_inter / slice), max_active).
__global__ void __launch_bounds__(kThreads)
    down_w4a16(const MoeExpertQ* __restrict__ experts, MoeShape sh, moe::Plan p, int slice) {
  const int a = blockIdx.z;
  if (a >= *p.n_active) return;
  const MoeExpertQ ex = experts[p.act_expert[a]];
  const int k0 = blockIdx.y * slice;
  if (k0 >= ex.inter) return;  // this expert is narrower than the widest
  const int k1 = min(ex.inter, k0 + slice);
  const int n0 = (blockIdx.x * kThreads + threadIdx.x) * 4;
  __shared__ float4 xs4[kTok * kMaxSlice / 4];
  float* xs = reinterpret_cast<float*>(xs4);
  for_each_pass(
      p, a, k1 - k0, n0 < sh.d, xs,
      [&](int slot, int kk) {
        const int64_t at = int64_t(slot) * sh.max_inter + k0 + kk;
        const float g = p.h[at];
        return g / (1.0f + __expf(-g)) * p.u[at];  // h = silu(gate) * up
      },
      [&](auto rows, const int(&slot)[kTok], int nt) {
        constexpr int MR = decltype(rows)::value;
        float y[MR][4] = {};
        slice_dot<MR>(ex.down, xs, k0, k1, n0, y);
        add_rows<MR>(p.y, sh.d, slot, nt, n0, y);
      });
}

}  // namespace

Status moe_ffn_w4a16(const MoeExpertQ* experts, const MoeShape& sh, const float* x, const int32_t* ids,
                     const float* w, int n, int k, void* scratch, float* out, int sm_count, int group_size,
                     int down_group_size, cudaStream_t s) {
  if (n <= 0) return ok_status();
  const int nk = n * k, A = moe::max_active(nk, sh.n_experts);
  moe::Plan p;
  moe::carve(scratch, nk, sh.n_experts, sh.d, sh.max_inter, &p, /*gate_up_apart=*/true);
  SPK_TRY(moe::build_plan(ids, nk, sh.n_experts, p, s));
  const size_t hbytes = size_t(nk) * sh.max_inter * sizeof(float);
  SPK_CUDA_CHECK(cudaMemsetAsync(p.h, 0, hbytes, s));
  SPK_CUDA_CHECK(cudaMemsetAsync(p.u, 0, hbytes, s));
  SPK_CUDA_CHECK(cudaMemsetAsync(p.y, 0, size_t(nk) * sh.d * sizeof(float), s));
  const int inter_blocks = (sh.max_inter + kBlockCols - 1) / kBlockCols,
            d_blocks = (sh.d + kBlockCols - 1) / kBlockCols;
  const int s1 = w4a16::slice_rows(sh.d, group_size, inter_blocks * A, sm_count, kMaxSlice);
  gate_up_w4a16<<<dim3(inter_blocks, (sh.d + s1 - 1) / s1, A), kThreads, 0, s>>>(experts, sh, x, k, p, s1);
  SPK_CUDA_CHECK(cudaGetLastError());
  const int s2 = w4a16::slice_rows(sh.max_inter, down_group_size, d_blocks * A, sm_count, kMaxSlice);
  down_w4a16<<<dim3(d_blocks, (sh.max_inter + s2 - 1) / s2, A), kThreads, 0, s>>>(experts, sh, p, s2);
  SPK_CUDA_CHECK(cudaGetLastError());
  return moe::combine(ids, w, sh.n_experts, n, k, sh.d, p.y, out, s);
}

}  // namespace spk::cuda
