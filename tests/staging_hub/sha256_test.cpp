// FIPS 180-4 / NIST example vectors, plus chunked updates across block boundaries.
#include "orchestrator/staging/hub/sha256.h"

#include <gtest/gtest.h>

using namespace spk::staging;

TEST(Sha256, StandardVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(
      sha256_hex(
          "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnop"
          "qrsmnopqrstnopqrstu"),
      "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, ChunkedEqualsWhole) {
  std::string s;
  for (int i = 0; i < 1000; ++i) s += static_cast<char>(i * 7 + 3);
  for (std::size_t chunk : {1u, 19u, 63u, 64u, 65u, 111u, 989u}) {
    Sha256 h;
    for (std::size_t o = 0; o < s.size(); o += chunk) h.update(s.data() + o, std::min(chunk, s.size() - o));
    EXPECT_EQ(h.hex(), sha256_hex(s)) << "chunk " << chunk;
  }
}
