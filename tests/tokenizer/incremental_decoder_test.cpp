// IncrementalDecoder: streaming one id at a time yields valid UTF-8 chunks whose concatenation is
// the full decode, holding back bytes of characters split across byte-level tokens or across
// SentencePiece byte-fallback tokens (<0xF0><0x9F><0x98><0x80>).
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

std::shared_ptr<Tokenizer> load(const char* name) {
  auto r = Tokenizer::load(testing::model_dir(name));
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().what());
  return r.ok() ? *r : nullptr;
}

// SentencePiece lineage: rare characters (not in the vocabulary) arrive as byte-fallback tokens and
// come out only once complete. The stream continues a prompt, so it keeps the leading " " that
// decode() strips from a whole text (as vLLM's detokenizer does).
TEST(IncrementalDecoder, SentencePieceByteFallbackStreams) {
  for (const char* name : {"llama2", "gemma3"}) {
    auto tok = load(name);
    ASSERT_TRUE(tok);
    std::string text =
        "Hi \xF0\x9F\xAB\xB7 \xF0\x9F\x91\xA9\xF0\x9F\x8F\xBD\xE2\x80\x8D\xF0\x9F\x92\xBB "
        "\xF0\xA0\x80\x80\xF0\xAA\x9A\xA5 \xEA\x99\xAE caf\xC3\xA9  \xD0\x9F\xD1\x80\xD0\xB8\n\tx";
    auto ids = tok->encode(text, true);
    size_t byte_tokens = 0;
    for (int32_t id : ids) byte_tokens += tok->id_to_token(id).rfind("<0x", 0) == 0;
    EXPECT_GE(byte_tokens, 4u) << name << ": the rare characters should need byte fallback";
    IncrementalDecoder dec(tok, true);
    std::string acc;
    for (int32_t id : ids) {
      std::string chunk = dec.push(id);
      EXPECT_TRUE(utf8::is_valid(chunk)) << name << ": chunk is not valid UTF-8 after id " << id;
      acc += chunk;
    }
    acc += dec.finish();
    std::string whole = tok->decode(ids, true);
    EXPECT_EQ(whole, text) << name;
    EXPECT_TRUE(acc == whole || acc == " " + whole) << name << ": stream \"" << acc << "\"";
  }
}

TEST(IncrementalDecoder, SentencePieceHoldsBackByteTokensUntilTheCharacterCompletes) {
  auto tok = load("llama2");
  ASSERT_TRUE(tok);
  std::vector<int32_t> ids;
  for (const char* t : {"<0xF0>", "<0x9F>", "<0x98>", "<0x80>"}) {
    ids.push_back(tok->token_to_id(t));
    ASSERT_GE(ids.back(), 0) << t;
  }
  IncrementalDecoder dec(tok, false);
  EXPECT_EQ(dec.push(tok->token_to_id("\xE2\x96\x81Hi")), " Hi");
  EXPECT_EQ(dec.push(ids[0]), "");
  EXPECT_EQ(dec.push(ids[1]), "");
  EXPECT_EQ(dec.push(ids[2]), "");
  EXPECT_EQ(dec.push(ids[3]), "\xF0\x9F\x98\x80");
  EXPECT_EQ(dec.push(ids[0]), "");
  EXPECT_EQ(dec.finish(), "\xEF\xBF\xBD");  // truncated at the end
  std::vector<int32_t> all = {tok->token_to_id("\xE2\x96\x81Hi")};
  all.insert(all.end(), ids.begin(), ids.end());
  EXPECT_EQ(tok->decode(all, false), "Hi\xF0\x9F\x98\x80");
}

}  // namespace
}  // namespace spk::rt
