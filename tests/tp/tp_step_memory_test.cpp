// The memory plan under tensor parallelism (issue 42): at world 2, one rank per thread over Gloo on
// loopback, each rank's planned activation bytes cover what its steps reserve (within 1.25x) and nothing is
// allocated after the KV pool, for a dense and a mixture-of-experts model; a rank plans less than world 1.
#include <gtest/gtest.h>

#include "runtime/dist/process_group.h"
#include "runtime/model/model.h"
#include "tests/model/random_model.h"
#include "tests/model/random_moe_model.h"
#include "tests/model/step_memory_check.h"
#include "tests/tp/tp_test_util.h"

namespace spk::test {
namespace {

void check_world(const rt::ModelConfig& cfg, std::shared_ptr<rt::WeightSource> weights,
                 const rt::StepLimits& lim, int world) {
  auto single = rt::Model::load(cfg, weights, {.threads = 1});
  ASSERT_TRUE(single.ok()) << single.error().what();
  const uint64_t planned_one = (*single)->activation_bytes(lim);
  std::vector<StepMemoryFigures> figs(world);
  const auto errors =
      run_world(world,
                [&](int r, rt::dist::Communicator& comm) -> Status {
                  auto m = rt::Model::load(cfg, weights,
                                           {.tp_rank = r, .tp_world = world, .threads = 1, .comm = &comm});
                  if (!m.ok()) return m.error();
                  figs[r] = check_step_memory(**m, lim);
                  float done = 1;
                  (void)comm.all_reduce_sum(&done, 1, nullptr);
                  return ok_status();
                },
                {.collective_timeout = std::chrono::seconds(30)});
  ASSERT_TRUE(errors.empty()) << errors.front();
  for (int r = 0; r < world; ++r) {
    std::printf("world %d rank %d: activations planned %llu bytes, reserved %llu (world 1 plans %llu)\n",
                world, r, static_cast<unsigned long long>(figs[r].planned),
                static_cast<unsigned long long>(figs[r].reserved),
                static_cast<unsigned long long>(planned_one));
    EXPECT_GT(figs[r].reserved, 0u);
    EXPECT_LT(figs[r].planned, planned_one) << "a rank of world " << world << " plans no less than world 1";
  }
}

TEST(TpStepMemory, DenseRanksAllocateNothingAfterThePool) {
  const rt::ModelConfig c = small_config(rt::Arch::qwen3);
  check_world(c, random_weights(c, 11), {97, 5, 128, 16}, 2);
}

TEST(TpStepMemory, MixtureOfExpertsRanksAllocateNothingAfterThePool) {
  const rt::ModelConfig c = small_moe_config(rt::Arch::qwen3_moe);
  check_world(c, random_moe_weights(c, 12), {89, 7, 128, 16}, 2);
}

}  // namespace
}  // namespace spk::test
