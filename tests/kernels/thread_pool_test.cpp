#include "kernels/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace spk::cpu {
namespace {

TEST(ThreadPool, EveryIndexExactlyOnceAcrossManyJobs) {
  ThreadPool pool(3);
  for (int64_t n : {1, 19, 111, 989, 100000}) {
    std::vector<std::atomic<int>> hits(n);
    for (int rep = 0; rep < 20; ++rep) {
      pool.parallel_for(n, 7, [&](int64_t a, int64_t b) {
        for (int64_t i = a; i < b; ++i) hits[i].fetch_add(1);
      });
    }
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 20) << "n=" << n << " i=" << i;
  }
}

TEST(ThreadPool, SingleThreadRunsInline) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.size(), 1);
  int64_t sum = 0;
  pool.parallel_for(10, 1, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) sum += i;
  });
  EXPECT_EQ(sum, 45);
}

}  // namespace
}  // namespace spk::cpu
