// What the CUDA backend's steps need besides the model's own activations, as a function of the largest
// step (kernels/step_shapes.h): the one place that knows each internal buffer's size, used both to
// reserve them before the KV pool (CudaBackend::reserve_scratch) and to plan (scratch_bytes). The ops
// size their buffers with the same functions (attention_launch, the *_bytes helpers), so a step within
// the shapes never grows one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/attention/select.h"
#include "kernels/step_shapes.h"

namespace spk::cuda {

// Every internal buffer at the shapes' maximum.
struct ScratchNeeds {
  size_t partial = 0, counters = 0;  // attention (the largest over every token count a step may have)
  int gemm_tokens = 0, gemm_k = 0;   // cuBLASLt staging (Gemm::bytes_for)
  size_t gemm = 0;
  size_t moe = 0;                                           // moe_ffn's plan, h and y (moe_plan.h carve)
  size_t moe_tables = 0;                                    // the experts' pointer tables, one per MoE layer
  size_t meta_tokens = 0, meta_tiles = 0, meta_tables = 0;  // begin_step's arrays (int32 words)
  size_t meta = 0;
  size_t sample_rows = 0;  // sample(): rows of parameters/results (pinned) and argmax keys
  size_t sample = 0;       // device bytes of the argmax keys
  [[nodiscard]] size_t device_bytes() const {
    return partial + counters + gemm + moe + moe_tables + meta + sample;
  }
};
ScratchNeeds plan_scratch(const StepShapes& s, const AttnKnobs& k);

// begin_step's metadata words for n tokens: positions, slots, table offsets (n each), prefill tiles
// (two words per tile of <= kPrefillTileQ tokens of one sequence) and the block tables.
size_t meta_tile_words(int max_tokens, int max_seqs);
// Capacity (words) the metadata buffer gives an array that needs `need` words and had `cap`: at least 256,
// doubling, a multiple of 4 (every array stays 16-byte aligned).
size_t meta_capacity(size_t need, size_t cap);
// Rows sample() keeps room for when it needs `rows` (at least 64, so small batches do not regrow it).
inline size_t sample_capacity(size_t rows) { return rows < 64 ? 64 : rows; }

}  // namespace spk::cuda
