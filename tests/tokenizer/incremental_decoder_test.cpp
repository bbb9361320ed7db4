// IncrementalDecoder: streaming one id at a time yields valid UTF-8 chunks whose concatenation is
// the full decode, holding back bytes of characters split across byte-level tokens.
#include <gtest/gtest.h>

#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/utf8.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace spk::rt {
namespace {

std::shared_ptr<Tokenizer> qwen() {
  static std::shared_ptr<Tokenizer> tok = [] {
    auto r = Tokenizer::load(testing::model_dir("qwen3"));
    return r.ok() ? *r : nullptr;
  }();
  return tok;
}

TEST(IncrementalDecoder, StreamEqualsDecodeAndChunksAreValidUtf8) {
  auto tok = qwen();
  ASSERT_TRUE(tok);
  std::string text = "Hello 世界! 👩🏽‍💻 emoji ZWJ, 🇩🇪 flag, ";
  text += "café, 日本語のテキスト, ";
  text += "<|im_start|>user\n\tcode() {}  \r\n";
  auto ids = tok->encode(text, false);
  for (bool skip : {false, true}) {
    IncrementalDecoder dec(tok, skip);
    std::string acc;
    for (int32_t id : ids) {
      std::string chunk = dec.push(id);
      EXPECT_TRUE(utf8::is_valid(chunk)) << "chunk is not valid UTF-8 after id " << id;
      acc += chunk;
    }
    acc += dec.finish();
    EXPECT_EQ(acc, tok->decode(ids, skip));
  }
}

TEST(IncrementalDecoder, HoldsBackSplitCharacterThenEmitsIt) {
  auto tok = qwen();
  ASSERT_TRUE(tok);
  // "€" is E2 82 AC; feed its three byte-level tokens one by one.
  std::vector<int32_t> bytes;
  for (char b : std::string("\xE2\x82\xAC")) {
    std::string piece = byte_level::encode(std::string(1, b));
    int32_t id = tok->token_to_id(piece);
    ASSERT_GE(id, 0) << piece;
    bytes.push_back(id);
  }
  IncrementalDecoder dec(tok, false);
  EXPECT_EQ(dec.push(bytes[0]), "");
  EXPECT_EQ(dec.push(bytes[1]), "");
  EXPECT_EQ(dec.push(bytes[2]), "\xE2\x82\xAC");
  EXPECT_EQ(dec.finish(), "");
}

TEST(IncrementalDecoder, InvalidAndTruncatedBytesBecomeReplacementCharacters) {
  auto tok = qwen();
  ASSERT_TRUE(tok);
  int32_t e2 = tok->token_to_id("\xC3\xA2"), a = tok->token_to_id("a");
  ASSERT_GE(e2, 0);
  ASSERT_GE(a, 0);
  IncrementalDecoder dec(tok, false);
  EXPECT_EQ(dec.push(e2), "");
  EXPECT_EQ(dec.push(a),
            "\xEF\xBF\xBD"
            "a");  // lead byte followed by ASCII: U+FFFD, then 'a'
  EXPECT_EQ(dec.push(e2), "");
  EXPECT_EQ(dec.finish(), "\xEF\xBF\xBD");  // truncated at the end
  EXPECT_EQ(tok->decode({e2, a, e2}, false),
            "\xEF\xBF\xBD"
            "a\xEF\xBF\xBD");
}

}  // namespace
}  // namespace spk::rt
