#include "runtime/serve/memory_planner.h"

#include <cmath>
#include <cstdio>

namespace spk::rt {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Smallest GMU (3 decimals, rounded up) for which `need` bytes fit in the device.
double gmu_for(double need, double device) {
  double g = std::ceil(need / device * 1000.0 - 1e-9) / 1000.0;
  while (device * g < need) g += 0.001;  // the decimal printed must really fit after rounding to double
  return g;
}

}  // namespace

std::string format_gib(double bytes, bool round_up) {
  double g = bytes / kGiB;
  if (round_up) g = std::ceil(g * 100.0 - 1e-9) / 100.0;
  return fmt("%.2f", g);
}

std::vector<std::string> MemoryPlan::log_lines() const {
  return {
      "Available KV cache memory: " + format_gib(static_cast<double>(available_kv_bytes)) + " GiB",
      "KV cache size: " + std::to_string(kv_tokens) + " tokens",
      "Maximum concurrency for " + std::to_string(input.max_model_len) +
          " tokens per request: " + fmt("%.2f", max_concurrency) + "x",
  };
}

nlohmann::json MemoryPlan::to_json() const {
  const auto& i = input;
  return {
      {"device_bytes", i.device_bytes},
      {"gpu_memory_utilization", i.gpu_memory_utilization},
      {"weight_bytes", i.weight_bytes},
      {"activation_bytes", i.activation_bytes},
      {"graph_bytes", i.graph_bytes},
      {"other_bytes", i.other_bytes},
      {"kv_bytes_per_token", i.kv_bytes_per_token},
      {"block_size", i.block_size},
      {"max_model_len", i.max_model_len},
      {"available_kv_bytes", available_kv_bytes},
      {"available_kv_gib", available_kv_bytes / kGiB},
      {"num_blocks", num_blocks},
      {"kv_tokens", kv_tokens},
      {"max_concurrency", max_concurrency},
      {"log", log_lines()},
  };
}

Result<MemoryPlan> plan_memory(const MemoryPlanInput& in) {
  if (in.device_bytes == 0) return make_error("device memory is 0 bytes", "on cpu pass --device-memory-gib");
  if (!(in.gpu_memory_utilization > 0.0 && in.gpu_memory_utilization <= 1.0))
    return make_error(
        "gpu_memory_utilization " + fmt("%g", in.gpu_memory_utilization) + " is out of range (0,1]",
        "set --gpu-memory-utilization to a value like 0.90");
  if (in.block_size <= 0 || in.kv_bytes_per_token == 0 || in.max_model_len <= 0)
    return make_error("block_size " + std::to_string(in.block_size) + ", kv_bytes_per_token " +
                          std::to_string(in.kv_bytes_per_token) + ", max_model_len " +
                          std::to_string(in.max_model_len) + ": all must be positive",
                      "set --block-size and --max-model-len");

  const double device = static_cast<double>(in.device_bytes);
  const double fixed = static_cast<double>(in.weight_bytes) + static_cast<double>(in.activation_bytes) +
                       static_cast<double>(in.graph_bytes) + static_cast<double>(in.other_bytes);
  // The pool one max_model_len request needs, in whole blocks.
  const double block_bytes = static_cast<double>(in.kv_bytes_per_token) * in.block_size;
  const int64_t req_blocks = (in.max_model_len + in.block_size - 1) / in.block_size;
  const double req_bytes = static_cast<double>(req_blocks) * block_bytes;
  const double budget = device * in.gpu_memory_utilization - fixed;
  const std::string gmu_fit =
      gmu_for(fixed + req_bytes, device) <= 1.0
          ? "set --gpu-memory-utilization >= " + fmt("%.3f", gmu_for(fixed + req_bytes, device))
          : "no --gpu-memory-utilization fits: lower --max-model-len / --max-num-batched-tokens / "
            "--max-num-seqs, or add memory "
            "(--device-memory-gib / --tensor-parallel-size)";
  const std::string breakdown = "device " + format_gib(device) + " GiB x gpu_memory_utilization " +
                                fmt("%g", in.gpu_memory_utilization) + " = " +
                                format_gib(device * in.gpu_memory_utilization) + " GiB; weights " +
                                format_gib(static_cast<double>(in.weight_bytes)) + " GiB, activations " +
                                format_gib(static_cast<double>(in.activation_bytes)) + " GiB, graphs " +
                                format_gib(static_cast<double>(in.graph_bytes)) + " GiB, other " +
                                format_gib(static_cast<double>(in.other_bytes)) + " GiB";
  if (budget < 0)
    return make_error("KV cache memory budget is negative: short by " + format_gib(-budget, true) + " GiB (" +
                          breakdown + ")",
                      gmu_fit);

  MemoryPlan p;
  p.input = in;
  p.available_kv_bytes = static_cast<int64_t>(budget);
  p.num_blocks = static_cast<int>(std::min<double>(std::floor(budget / block_bytes), 1 << 30));
  p.kv_tokens = static_cast<int64_t>(p.num_blocks) * in.block_size;
  p.max_concurrency = static_cast<double>(p.kv_tokens) / in.max_model_len;
  if (p.num_blocks < req_blocks)
    return make_error(
        "KV cache holds " + std::to_string(p.kv_tokens) + " tokens (" + format_gib(budget) +
            " GiB), less than one request of max_model_len " + std::to_string(in.max_model_len) + " (" +
            breakdown + ")",
        "set --max-model-len <= " + std::to_string(p.kv_tokens) + " (the largest that fits), or " + gmu_fit);
  return p;
}

}  // namespace spk::rt
