// Issue 43 item 1: a directory holding both model.safetensors and model.safetensors.index.json (a stale
// file from an earlier layout) is refused, naming both files and the fix, whichever of the two is stale.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"

namespace spk::rt {
namespace {

namespace fs = std::filesystem;

class CheckpointLayoutTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spk_cklayout_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (int i = 0; i < 4; ++i)
      specs_.push_back({"layer" + std::to_string(i) + ".weight", DType::bf16, {16, 32}});
  }
  void TearDown() override { fs::remove_all(dir_); }
  Status write(const fs::path& d, uint64_t shard_bytes, char fill) {
    return write_checkpoint_shards(
        d.string(), specs_, [fill](const TensorSpec&, uint8_t* p, uint64_t n) { std::memset(p, fill, n); },
        shard_bytes);
  }
  void expect_refused() {
    auto r = Checkpoint::open(dir_.string());
    ASSERT_FALSE(r.ok()) << "a directory with both layouts was loaded";
    const std::string e = r.error().what();
    EXPECT_NE(e.find("model.safetensors and model.safetensors.index.json"), std::string::npos) << e;
    EXPECT_NE(e.find(dir_.string()), std::string::npos) << e;
    EXPECT_NE(e.find("stale"), std::string::npos) << e;
    EXPECT_NE(e.find("sparkctl stage"), std::string::npos) << e;
  }
  fs::path dir_;
  std::vector<TensorSpec> specs_;
};

// The case: the checkpoint moved to shards + index, an old single file stayed behind.
TEST_F(CheckpointLayoutTest, StaleSingleFileBesideShardsRefused) {
  ASSERT_TRUE(write(dir_ / "old", 1 << 30, 'o').ok());
  ASSERT_TRUE(write(dir_, 2048, 'n').ok());  // shards + index
  ASSERT_TRUE(fs::exists(dir_ / "model.safetensors.index.json"));
  fs::copy_file(dir_ / "old" / "model.safetensors", dir_ / "model.safetensors");
  fs::remove_all(dir_ / "old");
  expect_refused();
}

// The other way round: a stale index (and its shards) beside a new single file.
TEST_F(CheckpointLayoutTest, StaleIndexBesideSingleFileRefused) {
  ASSERT_TRUE(write(dir_ / "old", 2048, 'o').ok());
  ASSERT_TRUE(write(dir_, 1 << 30, 'n').ok());
  for (const auto& e : fs::directory_iterator(dir_ / "old"))
    if (e.is_regular_file()) fs::copy_file(e.path(), dir_ / e.path().filename());
  fs::remove_all(dir_ / "old");
  expect_refused();
}

TEST_F(CheckpointLayoutTest, EitherLayoutAloneStillLoads) {
  ASSERT_TRUE(write(dir_, 2048, 'n').ok());
  EXPECT_TRUE(Checkpoint::open(dir_.string()).ok());
  ASSERT_TRUE(write(dir_, 1 << 30, 'n').ok());  // the writer removes the index it replaces
  EXPECT_FALSE(fs::exists(dir_ / "model.safetensors.index.json"));
  EXPECT_TRUE(Checkpoint::open(dir_.string()).ok());
}

}  // namespace
}  // namespace spk::rt
