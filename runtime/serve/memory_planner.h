// KV pool sizing, the way vLLM users know it:
//   budget = device memory x gpu_memory_utilization - weights - peak activations - graphs - other
// The pool gets floor(budget / (kv_bytes_per_token x block_size)) blocks. On CPU "device memory" is a
// configured RAM budget (--device-memory-gib) so that all of this is testable in CI.
// Refuses (an Error, never a silent shrink) when the budget is negative (message: the GiB shortfall and
// the smallest GMU that fits) or when one max_model_len request does not fit (message: the largest
// max_model_len that fits).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/base/status.h"

namespace spk::rt {

struct MemoryPlanInput {
  uint64_t device_bytes = 0;
  double gpu_memory_utilization = 0.9;
  uint64_t weight_bytes = 0;
  uint64_t activation_bytes = 0;  // peak of one step of max_num_batched_tokens
  uint64_t graph_bytes = 0;       // CUDA graph pools (0 on CPU)
  uint64_t other_bytes = 0;       // runtime overhead: allocator slack, communicator buffers
  uint64_t kv_bytes_per_token = 0;
  int block_size = 16;
  int max_model_len = 0;
};

struct MemoryPlan {
  MemoryPlanInput input;
  int64_t available_kv_bytes = 0;
  int num_blocks = 0;
  int64_t kv_tokens = 0;  // num_blocks x block_size
  double max_concurrency = 0;
  // Exactly: "Available KV cache memory: X GiB", "KV cache size: N tokens",
  // "Maximum concurrency for L tokens per request: Cx".
  [[nodiscard]] std::vector<std::string> log_lines() const;
  [[nodiscard]] nlohmann::json to_json() const;
};

Result<MemoryPlan> plan_memory(const MemoryPlanInput& in);

// Formatting shared with the messages: bytes as GiB with 2 decimals; `round_up` never understates.
std::string format_gib(double bytes, bool round_up = false);

}  // namespace spk::rt
