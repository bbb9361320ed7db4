// Kernel knobs: the SPARKCTL_* environment variables that steer the CUDA kernels and their fusions, each
// declared once here (name, default, range, one line of help). They exist for measuring (turn a fusion off,
// pick a tiling), never for correctness: every value gives the same results. `sparkctl dev knobs` prints
// the table with the values this process sees.
#pragma once

#include <string>
#include <vector>

namespace spk {

#define SPK_KNOBS(X)                                                                                         \
  X(CUDA_GRAPHS, 1, 0, 1, "capture repeated decode steps as CUDA graphs (0: every op launched eagerly)")     \
  X(GEMV_MAX_BATCH, 2, 0, 8, "decode batches up to this many rows take the GEMV, larger ones cuBLASLt")      \
  X(INT4_EXPERTS, 1, 0, 1, "0: refuse GPTQ MoE experts on CUDA (1: the int4 expert kernels run them)")       \
  X(GEMV_GROUP, 1, 0, 1, "GEMVs reading the same x (q/k/v, gate/up) share one launch")                       \
  X(NORM_FUSE, 1, 0, 1, "an rmsnorm folds into the GEMV that reads its output")                              \
  X(RESIDUAL_FUSE, 1, 0, 1, "the residual add folds into the GEMV that made the delta (o_proj, down_proj)")  \
  X(SWIGLU_FUSE, 1, 0, 1, "silu(gate) * up is formed inside the gate/up GEMV")                               \
  X(ARGMAX_FUSE, 1, 0, 1, "the lm_head GEMV leaves each row's argmax for greedy sampling")                   \
  X(ROPE_FUSE, 1, 0, 1, "rope and the KV cache write run as one kernel")                                     \
  X(ATTN_ROPE_FUSE, 1, 0, 1, "at decode, rope and the cache write fold into the attention kernel")           \
  X(STAGING_REUSE, 1, 0, 1, "consecutive GEMMs on the same x share its bf16 staging pass")                   \
  X(QUEUED_UPLOADS, 1, 0, 1, "small uploads are queued in op order, inside the step's graph (0: synced)")    \
  X(SHARED_KV_ATTN, 1, 0, 1, "decode attention: one block per kv head for its GQA group (0: per q head)")    \
  X(SPLIT_MERGE, 1, 0, 1, "split-KV partials merged by the last split block (0: by a second kernel)")        \
  X(STEP_CHUNKS, 1, 0, 1, "a step is launched in chunks while the host builds the rest (0: one launch)")     \
  X(FIRST_CHUNK_OPS, 8, 1, 1 << 20, "ops in a step's first chunk (later chunks: 64)")                        \
  X(MOE_GEMM_MIN_TOKENS, 64, 1, 1 << 30,                                                                     \
    "MoE steps of this many tokens or more run expert GEMMs on tensor cores")                                \
  X(PDL, 1, 0, 1, "programmatic dependent launch on sm_90 and newer")                                        \
  X(GEMM_AUTOTUNE, 0, 0, 1, "time cuBLASLt's top 8 algorithms per GEMM shape (default: its first pick)")     \
  X(GEMV_PERSIST, 1, 0, 2,                                                                                   \
    "GEMV blocks: 0 one per row group, 1 persistent except batch-1 many-wave, 2 always")                     \
  X(GEMV_ROWS, 4, 2, 4, "rows per GEMV block at batch 1-2 (2 or 4)")                                         \
  X(GEMV_SWIGLU_ROWS, 0, 0, 4, "rows per gate/up GEMV block at batch 1-2 (0: 2 at batch 1, else GEMV_ROWS)") \
  X(CUDA_STATS, 0, 0, 1, "at exit, print where a sampled step's wall time goes")

enum class Knob {
#define SPK_KNOB_ENUM(name, def, lo, hi, help) name,
  SPK_KNOBS(SPK_KNOB_ENUM)
#undef SPK_KNOB_ENUM
};

struct KnobInfo {
  const char* name;  // the environment variable
  int def, lo, hi;
  const char* help;
};

// Every knob, in declaration order.
const std::vector<KnobInfo>& knobs();
const KnobInfo& knob_info(Knob k);
// The knob's value: the environment's (an integer, clamped to [lo, hi]) or its default.
int knob(Knob k);
// Knobs that take a word rather than a number, with their choices (first = default).
struct WordKnobInfo {
  const char* name;
  const char* choices;  // "a|b"
  const char* help;
};
const std::vector<WordKnobInfo>& word_knobs();
// SPARKCTL_PREFILL_ATTN (tc | simt), SPARKCTL_MOE_GEMV (r1xu1,r2xu2): the environment's text or "".
std::string word_knob(const char* name);

}  // namespace spk
