// Non-finite weights: the branch-free count agrees with std::isfinite on every dtype at awkward sizes and
// alignments; a checkpoint holding NaN/Inf is reported (count, first tensor) or refused by policy; and
// the scan's throughput is printed (SPARKCTL_NONFINITE_BENCH_MB=1024 for the ~1 GB figure).
#include "runtime/checkpoint/nonfinite.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <random>

#include "runtime/model/weight_source.h"

namespace spk::rt {
namespace {

namespace fs = std::filesystem;

uint16_t f32_to_f16_bits(float f) {  // only for the special values and small normals used here
  if (std::isnan(f)) return 0x7E00;
  if (std::isinf(f)) return f > 0 ? 0x7C00 : 0xFC00;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = (u >> 16) & 0x8000;
  const int exp = static_cast<int>((u >> 23) & 0xFF) - 127 + 15;
  if (exp <= 0) return sign;
  if (exp >= 31) return sign | 0x7BFF;
  return static_cast<uint16_t>(sign | (exp << 10) | ((u >> 13) & 0x3FF));
}

TEST(NonFinite, CountMatchesIsfiniteAtAwkwardSizesAndOffsets) {
  std::mt19937 rng(1234);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::quiet_NaN()};
  for (size_t n : {1u, 19u, 111u, 989u}) {
    for (size_t offset : {0u, 1u, 3u}) {
      std::vector<float> v(n);
      std::uniform_real_distribution<float> d(-65000.f, 65000.f);
      size_t want = 0;
      for (auto& x : v) {
        x = d(rng);
        if (rng() % 7 == 0) {
          x = specials[rng() % 4];
          ++want;
        }
      }
      std::vector<uint8_t> f32(offset + 4 * n), h16(offset + 2 * n), b16(offset + 2 * n);
      for (size_t i = 0; i < n; ++i) {
        std::memcpy(f32.data() + offset + 4 * i, &v[i], 4);
        const uint16_t h = f32_to_f16_bits(v[i]), b = f32_to_bf16(v[i]);
        std::memcpy(h16.data() + offset + 2 * i, &h, 2);
        std::memcpy(b16.data() + offset + 2 * i, &b, 2);
      }
      SCOPED_TRACE("n=" + std::to_string(n) + " offset=" + std::to_string(offset) + " seed=1234");
      EXPECT_EQ(count_nonfinite(f32.data() + offset, DType::f32, n), want);
      EXPECT_EQ(count_nonfinite(h16.data() + offset, DType::f16, n), want);
      EXPECT_EQ(count_nonfinite(b16.data() + offset, DType::bf16, n), want);
      EXPECT_EQ(count_nonfinite(f32.data() + offset, DType::i32, n), 0u);
    }
  }
  // Largest finite values and denormals are finite; every NaN payload is not.
  const uint32_t edge[] = {0x7F7FFFFF, 0xFF7FFFFF, 0x00000001, 0x7F800001, 0xFFFFFFFF};
  EXPECT_EQ(count_nonfinite(edge, DType::f32, 5), 2u);
}

class NonFiniteCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spk_nonfinite_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // b.weight holds 3 NaN/Inf, d.weight 1; a and c are clean; ids (I32) hold bit patterns of NaN that
  // must not count. Sharded (so the scan crosses files).
  void write(bool poison) {
    std::vector<TensorSpec> specs = {{"a.weight", DType::f32, {64}},
                                     {"b.weight", DType::bf16, {100}},
                                     {"c.weight", DType::f16, {33}},
                                     {"d.weight", DType::f32, {7}},
                                     {"ids", DType::i32, {4}}};
    auto fill = [poison](const TensorSpec& t, uint8_t* dst, uint64_t n) {
      std::memset(dst, 0, n);
      if (t.name == "ids") std::memset(dst, 0xFF, n);
      if (!poison) return;
      if (t.name == "b.weight")
        for (int i : {0, 50, 99}) {
          const uint16_t nan = 0x7FC0;
          std::memcpy(dst + 2 * i, &nan, 2);
        }
      if (t.name == "d.weight") {
        const float inf = -std::numeric_limits<float>::infinity();
        std::memcpy(dst + 4 * 6, &inf, 4);
      }
    };
    ASSERT_TRUE(write_checkpoint_shards(dir_.string(), specs, fill, 256).ok());
  }
  fs::path dir_;
};

TEST_F(NonFiniteCheckpoint, CleanCheckpointLoadsSilently) {
  write(false);
  auto c = Checkpoint::open(dir_.string());
  ASSERT_TRUE(c.ok()) << c.error().what();
  const NonFiniteReport r = scan_nonfinite(*c);
  EXPECT_TRUE(r.clean());
  EXPECT_EQ(r.bytes_scanned, 64u * 4 + 200 + 66 + 28);  // the I32 tensor is not read
  EXPECT_TRUE(check_nonfinite(*c, NonFinitePolicy::refuse).ok());
  EXPECT_TRUE(open_checkpoint_weights(dir_.string(), true).ok());
}

TEST_F(NonFiniteCheckpoint, ReportedWithCountAndFirstTensorOrRefused) {
  write(true);
  auto c = Checkpoint::open(dir_.string());
  ASSERT_TRUE(c.ok()) << c.error().what();
  const NonFiniteReport r = scan_nonfinite(*c);
  EXPECT_EQ(r.values, 4u);
  EXPECT_EQ(r.tensors, 2u);
  EXPECT_EQ(r.first_tensor, "b.weight");
  EXPECT_EQ(r.first_values, 3u);
  EXPECT_TRUE(check_nonfinite(*c, NonFinitePolicy::warn).ok());  // a warning line, then loads
  auto refused = check_nonfinite(*c, NonFinitePolicy::refuse);
  ASSERT_FALSE(refused.ok());
  const std::string msg = refused.error().what();
  EXPECT_NE(msg.find("4 non-finite (NaN/Inf) weight value(s) in 2 tensor(s), first 'b.weight' (3)"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("--refuse-nonfinite"), std::string::npos) << msg;
  EXPECT_TRUE(open_checkpoint_weights(dir_.string(), false).ok());
  auto w = open_checkpoint_weights(dir_.string(), true);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().what().find("first 'b.weight'"), std::string::npos) << w.error().what();
}

// Throughput of the scan over a bf16 checkpoint in the page cache (64 MiB by default; set
// SPARKCTL_NONFINITE_BENCH_MB=1024 for the ~1 GB figure). Checks the count; prints GB/s.
TEST_F(NonFiniteCheckpoint, ScanThroughput) {
  uint64_t mb = 64;
  if (const char* e = std::getenv("SPARKCTL_NONFINITE_BENCH_MB")) mb = std::strtoull(e, nullptr, 10);
  const int64_t per = 16 << 20;  // 32 MiB bf16 tensors
  std::vector<TensorSpec> specs;
  for (uint64_t i = 0; i < std::max<uint64_t>(1, mb / 32); ++i)
    specs.push_back({"layers." + std::to_string(i) + ".weight", DType::bf16, {per}});
  auto fill = [](const TensorSpec& t, uint8_t* dst, uint64_t n) {
    for (uint64_t i = 0; i < n; i += 2) {
      dst[i] = static_cast<uint8_t>(i * 31);
      dst[i + 1] = static_cast<uint8_t>(0x3C ^ (i & 0x3));  // finite: exponent never all ones
    }
    if (t.name == "layers.0.weight") dst[1] = 0x7F, dst[0] = 0xC0;  // one NaN
  };
  ASSERT_TRUE(write_checkpoint_shards(dir_.string(), specs, fill, 4ull << 30).ok());
  auto c = Checkpoint::open(dir_.string());
  ASSERT_TRUE(c.ok()) << c.error().what();
  (void)scan_nonfinite(*c);  // warm the page cache, as the load's own reads would
  timespec c0{}, c1{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
  const NonFiniteReport r = scan_nonfinite(*c);
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
  const double cpu_s =
      static_cast<double>(c1.tv_sec - c0.tv_sec) + 1e-9 * static_cast<double>(c1.tv_nsec - c0.tv_nsec);
  EXPECT_EQ(r.values, 1u);
  EXPECT_EQ(r.first_tensor, "layers.0.weight");
  const double gbs = static_cast<double>(r.bytes_scanned) / r.seconds / 1e9;
  // CPU time too: on a shared machine the wall-clock figure is mostly other processes' share of the core.
  std::printf(
      "nonfinite scan: %.1f MB in %.3f s wall = %.2f GB/s; %.3f s CPU = %.2f GB/s per CPU-second (page cache)\n",
      static_cast<double>(r.bytes_scanned) / 1e6, r.seconds, gbs, cpu_s,
      static_cast<double>(r.bytes_scanned) / cpu_s / 1e9);
  EXPECT_GT(gbs, 0.0);
}

}  // namespace
}  // namespace spk::rt
