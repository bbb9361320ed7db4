// Block manager: all-or-nothing growth, deterministic ids, release returns blocks, usage gauge.
#include "runtime/serve/block_manager.h"

#include <gtest/gtest.h>

#include <set>

namespace spk::rt {
namespace {

TEST(BlockManager, GrowCoversTokensAndHandsOutLowestIdsFirst) {
  BlockManager bm(8, 16);
  std::vector<int32_t> t;
  EXPECT_EQ(bm.blocks_for(0), 0);
  EXPECT_EQ(bm.blocks_for(1), 1);
  EXPECT_EQ(bm.blocks_for(16), 1);
  EXPECT_EQ(bm.blocks_for(17), 2);
  ASSERT_TRUE(bm.grow(t, 17));
  EXPECT_EQ(t, (std::vector<int32_t>{0, 1}));
  ASSERT_TRUE(bm.grow(t, 32));  // still fits in 2 blocks
  EXPECT_EQ(t.size(), 2u);
  ASSERT_TRUE(bm.grow(t, 33));
  EXPECT_EQ(t, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(bm.num_free(), 5);
  EXPECT_DOUBLE_EQ(bm.usage(), 3.0 / 8.0);
}

TEST(BlockManager, GrowIsAllOrNothing) {
  BlockManager bm(4, 4);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(bm.grow(a, 12));  // 3 blocks
  EXPECT_FALSE(bm.can_grow(b, 8));
  EXPECT_FALSE(bm.grow(b, 8));  // needs 2, 1 free
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(bm.num_free(), 1);
  EXPECT_TRUE(bm.grow(b, 4));
  EXPECT_EQ(bm.num_free(), 0);
}

TEST(BlockManager, ReleaseReturnsBlocksAndReusesLowestFirst) {
  BlockManager bm(6, 2);
  std::vector<int32_t> a, b, c;
  ASSERT_TRUE(bm.grow(a, 4));  // 0 1
  ASSERT_TRUE(bm.grow(b, 4));  // 2 3
  ASSERT_TRUE(bm.grow(c, 4));  // 4 5
  bm.release(b);
  EXPECT_TRUE(b.empty());
  bm.release(a);
  EXPECT_EQ(bm.num_free(), 4);
  std::vector<int32_t> d;
  ASSERT_TRUE(bm.grow(d, 6));
  EXPECT_EQ(d, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(bm.ref_count(0), 1);
  EXPECT_EQ(bm.ref_count(3), 0);
}

TEST(BlockManager, NoBlockIsEverOwnedTwice) {
  BlockManager bm(64, 4);
  std::vector<std::vector<int32_t>> tables(10);
  uint64_t x = 12345;
  for (int step = 0; step < 2000; ++step) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    auto& t = tables[(x >> 33) % tables.size()];
    if ((x >> 20) % 4 == 0)
      bm.release(t);
    else
      (void)bm.grow(t, static_cast<int>(t.size()) * 4 + 1 + static_cast<int>((x >> 40) % 9));
    std::set<int32_t> seen;
    size_t owned = 0;
    for (const auto& tt : tables) {
      for (int32_t blk : tt) EXPECT_TRUE(seen.insert(blk).second) << "block " << blk << " owned twice";
      owned += tt.size();
    }
    ASSERT_EQ(owned + static_cast<size_t>(bm.num_free()), 64u);
  }
}

}  // namespace
}  // namespace spk::rt
