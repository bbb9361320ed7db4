// What this build honours for tensor parallelism: TP > 1 on backend cpu (Gloo), not on cuda (no NCCL).
#include <gtest/gtest.h>

#include "recipes/capabilities.h"

namespace spk {
namespace {

TEST(TpCapabilities, CpuTensorParallelIsHonouredCudaIsNot) {
  Recipe r;
  r.tensor_parallel = 4;
  r.backend = Backend::cpu;
  EXPECT_TRUE(unhonoured(r).empty());
  r.backend = Backend::cuda;
  auto u = unhonoured(r);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].feature, Feature::tensor_parallel);
  EXPECT_NE(u[0].detail.find("NCCL communicator, which is not built"), std::string::npos) << u[0].detail;
}

}  // namespace
}  // namespace spk
