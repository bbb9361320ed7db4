// Checkpoint directories: single file, shards + index, and the partial-download failure modes.
#include "runtime/checkpoint/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "kernels/base/fs.h"

namespace spk::rt {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("spk_ck_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    for (int i = 0; i < 4; ++i)
      specs_.push_back({"layer" + std::to_string(i) + ".weight", DType::bf16, {16, 32}});
  }
  void TearDown() override { fs::remove_all(dir_); }

  Status write(uint64_t shard_bytes) {
    return write_checkpoint_shards(
        dir_.string(), specs_,
        [](const TensorSpec& t, uint8_t* d, uint64_t n) {
          std::memset(d, t.name[5], n);  // the layer digit
        },
        shard_bytes);
  }
  std::string open_error() {
    auto r = Checkpoint::open(dir_.string());
    return r.ok() ? std::string("<opened>") : r.error().what();
  }

  fs::path dir_;
  std::vector<TensorSpec> specs_;
};

TEST_F(CheckpointTest, SingleFile) {
  ASSERT_TRUE(write(1 << 30).ok());
  auto r = Checkpoint::open(dir_.string());
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_EQ(r->names().size(), 4u);
  EXPECT_EQ(r->total_bytes(), 4u * 16 * 32 * 2);
  auto v = r->tensor("layer2.weight");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->shape, (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(v->data[100], '2');
}

TEST_F(CheckpointTest, ShardsThroughIndex) {
  ASSERT_TRUE(write(2048).ok());  // 1 KiB per tensor -> 2 shards
  ASSERT_TRUE(fs::exists(dir_ / "model-00002-of-00002.safetensors"));
  auto r = Checkpoint::open(dir_.string());
  ASSERT_TRUE(r.ok()) << r.error().what();
  EXPECT_TRUE(r->has("layer3.weight"));
  EXPECT_FALSE(r->has("layer4.weight"));
  EXPECT_EQ(r->tensor("layer3.weight")->data[0], '3');
  EXPECT_EQ(r->info("layer0.weight")->dtype, DType::bf16);
  auto missing = r->tensor("lm_head.weight");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().what().find("lm_head.weight"), std::string::npos);
  EXPECT_NE(missing.error().what().find(dir_.string()), std::string::npos);
}

TEST_F(CheckpointTest, EmptyDirectory) {
  const auto e = open_error();
  EXPECT_NE(e.find("no model.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find(dir_.string()), std::string::npos) << e;
}

TEST_F(CheckpointTest, MissingShardNamesShardAndTensor) {
  ASSERT_TRUE(write(2048).ok());
  fs::remove(dir_ / "model-00002-of-00002.safetensors");
  const auto e = open_error();
  EXPECT_NE(e.find("model-00002-of-00002.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
  EXPECT_NE(e.find("layer"), std::string::npos) << e;
}

TEST_F(CheckpointTest, IndexNamesTensorNotInShard) {
  ASSERT_TRUE(write(2048).ok());
  ASSERT_TRUE(write_file_atomic((dir_ / "model.safetensors.index.json").string(),
                                R"({"weight_map":{"layer0.weight":"model-00001-of-00002.safetensors",
                                    "ghost.weight":"model-00001-of-00002.safetensors"}})")
                  .ok());
  const auto e = open_error();
  EXPECT_NE(e.find("'ghost.weight'"), std::string::npos) << e;
  EXPECT_NE(e.find("model-00001-of-00002.safetensors"), std::string::npos) << e;
}

TEST_F(CheckpointTest, IndexShardNameEscapingDirectoryRefused) {
  ASSERT_TRUE(write_file_atomic((dir_ / "model.safetensors.index.json").string(),
                                R"({"weight_map":{"w":"../../etc/passwd"}})")
                  .ok());
  const auto e = open_error();
  EXPECT_NE(e.find("../../etc/passwd"), std::string::npos) << e;
  EXPECT_NE(e.find("'w'"), std::string::npos) << e;
}

TEST_F(CheckpointTest, IndexMalformed) {
  ASSERT_TRUE(
      write_file_atomic((dir_ / "model.safetensors.index.json").string(), "{\"weight_map\": [}").ok());
  EXPECT_NE(open_error().find("not valid JSON"), std::string::npos);
  ASSERT_TRUE(write_file_atomic((dir_ / "model.safetensors.index.json").string(), "{\"metadata\": {}}").ok());
  EXPECT_NE(open_error().find("weight_map"), std::string::npos);
}

TEST_F(CheckpointTest, CorruptShardErrorNamesShard) {
  ASSERT_TRUE(write(2048).ok());
  std::ofstream(dir_ / "model-00001-of-00002.safetensors", std::ios::binary | std::ios::trunc)
      << "garbage!garbage";
  EXPECT_NE(open_error().find("model-00001-of-00002.safetensors"), std::string::npos);
}

}  // namespace
}  // namespace spk::rt
