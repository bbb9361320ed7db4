// Model-level benchmark (no HTTP, no tokenizer): load time, prefill tok/s at given prompt lengths,
// and decode tok/s at given batch sizes, driving Model::forward with synthetic token ids exactly as
// the scheduler would (flattened batches, paged KV, the serving memory plan). Greedy: the next token is
// the argmax of the logits.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace spk::rt {

struct ModelBenchOptions {
  std::string model_dir;
  std::string backend = "cpu";
  std::vector<int> batches = {1};
  std::vector<int> prefill_lens = {};  // empty: no prefill figures
  int prompt_len = 128;                // context each decode sequence starts with
  int decode_steps = 64;               // timed decode steps per batch size (after warm-up)
  int warmup_steps = 4;
  int block_size = 16;
  // The memory plan, as `runtime serve` makes it: every buffer a step of max_num_batched_tokens (prefill
  // chunks) or max_num_seqs sequences (0: the largest batch) needs is reserved, then the KV pool takes
  // device memory x gpu_memory_utilization less weights and activations, then nothing allocates.
  int max_num_batched_tokens = 8192;  // also the prefill chunk (tokens per forward)
  int max_num_seqs = 0;
  double gpu_memory_utilization = 0.9;
  double device_memory_gib = 0;  // 0: the GPU's total (cuda); cpu: no plan, a pool of what the runs need
};

// One JSON document: {"load_s", "load_gb_per_s", "weight_bytes", "memory": {...}, "prefill": [...],
// "decode": [...]}.
Result<nlohmann::json> run_model_bench(const ModelBenchOptions& opts);

}  // namespace spk::rt
