// Mixture-of-experts SiLU-GLU FFN on CUDA (Backend::moe_ffn): out[t] = sum_j w[t, j] *
// down_e(silu(gate_e x[t]) * up_e x[t]) with e = ids[t, j] (-1: no expert), bf16 expert weights.
//
// Expert-major, so every active expert's weights are read once per step whatever the batch:
//  1. plan (moe_plan.h): the active experts and their slots, on the device (no host round trip);
//  2. gate/up: per (active expert, R intermediate rows) one warp streams the 2R weight rows (16-byte
//     streaming loads, U chunks of every row issued before any is used, so 2R x U loads are in flight a
//     lane) and dots them with each of the expert's tokens, 4 at a time -> h[slot] = silu(g) * u (fp32);
//  3. down: per (active expert, R output rows) likewise -> y[slot];
//     R x U per kernel: SPARKCTL_MOE_GEMV="R1xU1,R2xU2" (measuring only; 1x1 = one row, one load a lane);
//  4. combine: out[t] = sum of w * y over t's slots in ascending expert index (the CPU reference's order).
// With many tokens per expert (prefill, large batches) steps 2-3 run on tensor cores instead
// (moe_gemm.cu: bf16 activations, fp32 accumulation, 64 x 64 tiles per expert).
// Napkin math (Qwen3-30B-A3B, batch 1): 8 experts x 3 x 768 x 2048 x 2 B = 75.5 MB a layer, 3.6 GB a
// token over 48 layers: 0.85 ms at 4.26 TB/s.
#pragma once

#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/linear/w4a16.h"
#include "kernels/cuda/moe/moe_plan.h"

namespace spk::cuda {

struct MoeExpert {
  const bf16* gate;  // [inter, d]
  const bf16* up;    // [inter, d]
  const bf16* down;  // [d, inter]
  int inter;
};

// What the host checked once per expert table: every row 16-byte aligned (d and each inter multiples
// of 8, aligned bases), so the kernels may use vector loads; else the scalar loop.
struct MoeShape {
  int n_experts, d, max_inter;
  bool vec;
};

// scratch: moe::carve(scratch, n * k, n_experts, d, max_inter) bytes. tensor_cores: steps 2-3 as GEMMs
// (needs sh.vec).
Status moe_ffn_bf16(const MoeExpert* experts, const MoeShape& sh, const float* x, const int32_t* ids,
                    const float* w, int n, int k, void* scratch, bool tensor_cores, float* out,
                    cudaStream_t s);

// A GPTQ int4 expert (moe_w4a16.cu): gate, up with N = inter, K = d; down with N = d, K = inter. Groups in
// K order (no act-order g_idx), group size a multiple of 8 or one group of K; each weight reads its own.
struct MoeExpertQ {
  W4A16Weight gate, up, down;
  int inter;
};

// The same FFN over GPTQ experts. scratch: moe::carve(scratch, n * k, n_experts, d, max_inter, nullptr,
// true) bytes; sm_count sizes the K split, aligned to the gate/up and the down group sizes where it can.
Status moe_ffn_w4a16(const MoeExpertQ* experts, const MoeShape& sh, const float* x, const int32_t* ids,
                     const float* w, int n, int k, void* scratch, float* out, int sm_count, int group_size,
                     int down_group_size, cudaStream_t s);

namespace moe {
// The tensor-core steps 2-3 (moe_gemm.cu): h and y for every planned slot.
Status gemm_gate_up_down(const MoeExpert* experts, const MoeShape& sh, const float* x, int n, int k,
                         const Plan& p, cudaStream_t s);
}  // namespace moe

}  // namespace spk::cuda
