// Issue 44 on the CUDA backend: every buffer the largest prefill and decode need is reserved before the KV
// pool (planned = reserved within 1.25x), and after the pool (sealed) those steps allocate nothing: the
// backend's counters and the device's free memory both stay put, graphs captured and replayed included.
// A step past the plan is refused naming the knob, never a bare cudaMalloc failure.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <random>

#include "kernels/cuda/device_buffer.h"
#include "runtime/model/model.h"
#include "tests/model/random_moe_model.h"
#include "tests/model/step_memory_check.h"

namespace spk::test {
namespace {

uint64_t device_free() {
  size_t free_b = 0, total_b = 0;
  cudaDeviceSynchronize();
  cudaMemGetInfo(&free_b, &total_b);
  return free_b;
}

void run(const rt::ModelConfig& c, std::shared_ptr<rt::WeightSource> w, const rt::StepLimits& lim) {
  auto m = rt::Model::load(c, std::move(w), {.backend = "cuda"});
  ASSERT_TRUE(m.ok()) << m.error().what();
  const StepMemoryFigures f = check_step_memory(**m, lim, device_free);
  std::printf("activations planned %llu bytes, reserved %llu\n", static_cast<unsigned long long>(f.planned),
              static_cast<unsigned long long>(f.reserved));
}

TEST(CudaStepMemory, DenseLargestStepsAllocateNothingAfterThePool) {
  std::string why;
  if (!cuda::cuda_device_available(&why)) GTEST_SKIP() << "gpu test skipped: " << why;
  rt::ModelConfig c = small_config(rt::Arch::llama);
  c.hidden_size = 128, c.intermediate_size = 256, c.head_dim = 64, c.vocab_size = 1000;
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  // 989 tokens: the GEMM path and tiled prefill; 37 sequences: split-KV decode on the shared kernel.
  run(c, random_weights(c, seed), {989, 37, 1100, 16});
  run(c, random_weights(c, seed), {19, 1, 64, 16});  // GEMV-only decode, one sequence
}

TEST(CudaStepMemory, MixtureOfExpertsLargestStepsAllocateNothingAfterThePool) {
  std::string why;
  if (!cuda::cuda_device_available(&why)) GTEST_SKIP() << "gpu test skipped: " << why;
  for (rt::Arch arch : {rt::Arch::qwen3_moe, rt::Arch::qwen2_moe}) {
    rt::ModelConfig c = small_moe_config(arch);
    c.hidden_size = 128, c.head_dim = 64;
    const uint64_t seed = std::random_device{}();
    SCOPED_TRACE("seed " + std::to_string(seed));
    run(c, random_moe_weights(c, seed), {333, 19, 400, 16});
  }
}

}  // namespace
}  // namespace spk::test
