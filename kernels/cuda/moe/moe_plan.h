// The expert-major plan of one MoE step, built on the device (internal to moe_ffn.cu / moe_gemm.cu).
// From ids [n, k] (expert per slot, -1 = none): the active experts in ascending index, each with its
// slots' range in `order` (the slots grouped by expert; order inside a group is not fixed, and nothing
// computed depends on it: every slot's row is computed alone), and the 64-row tiles of those groups for
// the tensor-core path. All in one scratch buffer whose layout depends only on (n*k, E), so the step
// stays capturable in a CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/cuda_ops.h"

namespace spk::cuda::moe {

inline constexpr int kTileRows = 64;      // tokens per tensor-core tile
inline constexpr int kMaxExperts = 2048;  // the plan's shared-memory histogram

struct Plan {
  int* act_expert;  // [E]  active expert a -> its index
  int* act_off;     // [E]  first position of its slots in order
  int* act_cnt;     // [E]  number of its slots
  int* n_active;    // [1]
  int* tile_act;    // [T]  tile -> active expert
  int* tile_row0;   // [T]  tile -> first row inside the expert's group
  int* n_tiles;     // [1]
  int* order;       // [nk] slot indices grouped by expert
  float* h;         // [nk, max_inter] f32: silu(gate) * up per slot (GEMV path); gate alone (int4 path)
  float* u;         // [nk, max_inter] f32: up per slot (int4 path, carved only for it; else null)
  float* y;         // [nk, d] f32: down_e(h) per slot, before the weighted combine
  bf16* xb;         // [nk, d] bf16: x rows in plan order (tensor-core path)
  bf16* hb;         // [nk, max_inter] bf16: h in plan order (tensor-core path)
};

// Upper bounds of the grids that walk active experts / tiles (unused blocks exit at once).
inline int max_active(int nk, int E) { return nk < E ? nk : E; }
inline int max_tiles(int nk, int E) { return nk / kTileRows + max_active(nk, E) + 1; }

// Carves the plan out of `base` (nullptr: only counts). Returns the bytes used. gate_up_apart: the int4 path,
// which accumulates gate and up apart (u).
inline size_t carve(void* base, int nk, int E, int d, int max_inter, Plan* p, bool gate_up_apart = false) {
  size_t off = 0;
  auto take = [&](size_t bytes) {
    void* at = base ? static_cast<char*>(base) + off : nullptr;
    off += (bytes + 255) / 256 * 256;
    return at;
  };
  const size_t T = static_cast<size_t>(max_tiles(nk, E)), n = static_cast<size_t>(nk);
  Plan q;
  q.act_expert = static_cast<int*>(take(E * sizeof(int)));
  q.act_off = static_cast<int*>(take(E * sizeof(int)));
  q.act_cnt = static_cast<int*>(take(E * sizeof(int)));
  q.n_active = static_cast<int*>(take(sizeof(int)));
  q.tile_act = static_cast<int*>(take(T * sizeof(int)));
  q.tile_row0 = static_cast<int*>(take(T * sizeof(int)));
  q.n_tiles = static_cast<int*>(take(sizeof(int)));
  q.order = static_cast<int*>(take(n * sizeof(int)));
  q.h = static_cast<float*>(take(n * max_inter * sizeof(float)));
  q.y = static_cast<float*>(take(n * d * sizeof(float)));
  q.xb = static_cast<bf16*>(take(n * d * sizeof(bf16)));
  q.hb = static_cast<bf16*>(take(n * max_inter * sizeof(bf16)));
  q.u = gate_up_apart ? static_cast<float*>(take(n * max_inter * sizeof(float))) : nullptr;
  if (p) *p = q;
  return off;
}

// Builds the plan: one block of 1024 threads (ids histogram in shared memory, warp 0 scans it).
Status build_plan(const int32_t* ids, int nk, int E, const Plan& p, cudaStream_t s);

// out[t, r] = sum over t's slots j, in ascending expert index (the CPU reference's order), of
// w[t, j] * y[t * k + j, r].
Status combine(const int32_t* ids, const float* w, int n_experts, int n, int k, int d, const float* y,
               float* out, cudaStream_t s);

}  // namespace spk::cuda::moe
