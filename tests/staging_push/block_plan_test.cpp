#include "orchestrator/staging/push/block_plan.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace fs = std::filesystem;
using namespace spk::staging;

namespace {
struct TempDir {
  fs::path p = fs::temp_directory_path() / ("spk_push_" + std::to_string(::getpid()));
  TempDir() { fs::create_directories(p); }
  ~TempDir() { fs::remove_all(p); }
};
void write(const fs::path& f, const std::string& s) { std::ofstream(f, std::ios::binary) << s; }
std::string random_bytes(size_t n) {
  std::mt19937_64 g(42);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(g());
  return s;
}
}  // namespace

TEST(BlockPlan, SizesZeroOneAndAwkward) {
  TempDir t;
  write(t.p / "a", "");
  write(t.p / "b", "x");
  write(t.p / "c", random_bytes(9'751'000));  // ~9.3 MiB: 2 full 4 MiB blocks + a short one
  EXPECT_EQ(block_hashes((t.p / "a").string(), 4 << 20)->size(), 0u);
  EXPECT_EQ(block_hashes((t.p / "b").string(), 4 << 20)->size(), 1u);
  EXPECT_EQ(block_hashes((t.p / "c").string(), 4 << 20)->size(), 3u);
  EXPECT_TRUE(block_hashes((t.p / "missing").string(), 4 << 20)->empty());
}

TEST(BlockPlan, OneFlippedByteSendsOneBlock) {
  TempDir t;
  std::string data = random_bytes(9'751'000);
  write(t.p / "src", data);
  data[5'000'000] ^= 1;  // in block 1
  write(t.p / "dst", data);
  auto want = *block_hashes((t.p / "src").string(), 4 << 20);
  auto have = *block_hashes((t.p / "dst").string(), 4 << 20);
  EXPECT_EQ(blocks_to_send(want, have), std::vector<std::uint64_t>{1});
  EXPECT_EQ(blocks_to_send(want, {}).size(), 3u);         // cold: everything
  EXPECT_EQ(blocks_to_send(want, {want[0]}).size(), 2u);  // partial file: the rest
  EXPECT_TRUE(blocks_to_send(want, want).empty());        // identical: nothing
}

TEST(BlockPlan, SafeJoinRefusesEscapes) {
  TempDir t;
  EXPECT_TRUE(safe_join(t.p.string(), "model/shard-1.safetensors").ok());
  EXPECT_FALSE(safe_join(t.p.string(), "/etc/passwd").ok());
  EXPECT_FALSE(safe_join(t.p.string(), "../x").ok());
  EXPECT_FALSE(safe_join(t.p.string(), "a/../../x").ok());
  EXPECT_FALSE(safe_join(t.p.string(), "").ok());
  fs::create_directory_symlink("/tmp", t.p / "link");
  auto r = safe_join(t.p.string(), "link/x");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("symlink"), std::string::npos);
}

TEST(BlockPlan, ManyOnThreadsEqualsOneByOne) {
  TempDir t;
  write(t.p / "a", random_bytes(9'751'000));
  write(t.p / "b", "x");
  std::vector<std::string> paths{(t.p / "a").string(), "", (t.p / "b").string(), (t.p / "missing").string()};
  auto many = block_hashes_many(paths, 1 << 20, 3);
  ASSERT_TRUE(many.ok());
  ASSERT_EQ(many->size(), 4u);
  EXPECT_EQ((*many)[0], *block_hashes(paths[0], 1 << 20));
  EXPECT_TRUE((*many)[1].empty());
  EXPECT_EQ((*many)[2].size(), 1u);
  EXPECT_TRUE((*many)[3].empty());
}
