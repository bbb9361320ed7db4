// Warmup before readiness: the runtime decodes at every batch size from max_num_seqs down to 1 before it
// says "ready", so every decode shape (on CUDA: every graph bucket, captured on first use) is built now
// and never on a user's request. How: N = max_num_seqs one-token prompts submitted together, sequence i
// asked for 2i + 3 tokens with ignore_eos; they decode together and one finishes every second step, so
// the decode batch shrinks N, N, N-1, N-1, ..., 1, 1: each size twice, since the CUDA graph queue
// captures a shape at its second sighting (kernels/cuda/graph_queue.h). Cost: 2N + 2 steps (N = 256 on
// a GPU: about a second of decode).
#pragma once

#include <chrono>
#include <cstdint>

#include "kernels/base/status.h"
#include "runtime/serve/engine.h"

namespace spk::rt {

struct WarmupReport {
  int sequences = 0;
  double seconds = 0;
};

// Returns once every warmup sequence finished; an error names the sequence and the engine's message.
Result<WarmupReport> warm_decode_buckets(Engine& engine, int max_num_seqs, int32_t token,
                                         std::chrono::seconds timeout = std::chrono::seconds(600));

}  // namespace spk::rt
