// Model-level benchmark (no HTTP, no tokenizer): load time, prefill tok/s at given prompt lengths,
// and decode tok/s at given batch sizes, driving Model::forward with synthetic token ids exactly as
// the scheduler would (flattened batches, paged KV). Greedy: the next token is the argmax of the logits.
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
  int max_chunk = 8192;  // prefill chunk (tokens per forward)
};

// One JSON document: {"load_s", "load_gb_per_s", "weight_bytes", "prefill": [...], "decode": [...]}.
Result<nlohmann::json> run_model_bench(const ModelBenchOptions& opts);

}  // namespace spk::rt
