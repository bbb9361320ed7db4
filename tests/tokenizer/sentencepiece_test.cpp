// The SentencePiece-lineage pieces on hand-made tokenizer.json files: byte fallback, unk fusing,
// both merge spellings, Prepend/Replace normalizers, the Metaspace pre-tokenizer (prepend schemes,
// split), Split's merged behaviours, the Replace/ByteFallback/Fuse/Strip and Metaspace decoders, and
// the errors that name a component we do not implement.
#include <gtest/gtest.h>

#include <deque>
#include <nlohmann/json.hpp>

#include "runtime/tokenizer/hf_tokenizer.h"
#include "runtime/tokenizer/pre_tokenizer.h"

namespace spk::rt {
namespace {

using nlohmann::json;
const std::string kMeta = "\xE2\x96\x81";  // ▁

// ids: <unk>=0 <s>=1 </s>=2, <0x00>..<0xFF> = 3..258, then the pieces below from 259.
constexpr int32_t kByte0 = 3;
const std::vector<std::string> kPieces = {kMeta, "a",          "b",           kMeta + "a",
                                          "ab",  kMeta + "ab", kMeta + kMeta, "c"};
int32_t piece(const std::string& p) {
  for (size_t i = 0; i < kPieces.size(); ++i)
    if (kPieces[i] == p) return 259 + static_cast<int32_t>(i);
  return -1;
}

json llama2_style(bool byte_fallback = true, bool fuse_unk = true, bool array_merges = false) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  static const char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) vocab[std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">"] = kByte0 + b;
  for (const auto& p : kPieces) vocab[p] = piece(p);
  json merges = array_merges ? json::array({json::array({kMeta, "a"}), json::array({"a", "b"}),
                                            json::array({kMeta + "a", "b"}), json::array({kMeta, kMeta})})
                             : json::array({kMeta + " a", "a b", kMeta + "a b", kMeta + " " + kMeta});
  json added = json::array();
  for (int i = 0; i < 3; ++i)
    added.push_back({{"id", i},
                     {"content", i == 0   ? "<unk>"
                                 : i == 1 ? "<s>"
                                          : "</s>"},
                     {"special", true},
                     {"normalized", false}});
  return {
      {"added_tokens", added},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         json::array({{{"type", "Prepend"}, {"prepend", kMeta}},
                      {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMeta}}})}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders", json::array({{{"type", "Replace"}, {"pattern", {{"String", kMeta}}}, {"content", " "}},
                                  {{"type", "ByteFallback"}},
                                  {{"type", "Fuse"}},
                                  {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
      {"model",
       {{"type", "BPE"},
        {"unk_token", "<unk>"},
        {"fuse_unk", fuse_unk},
        {"byte_fallback", byte_fallback},
        {"vocab", vocab},
        {"merges", merges}}}};
}

std::shared_ptr<HfTokenizer> load(const json& j) {
  auto t = HfTokenizer::from_json(j.dump(), R"({"clean_up_tokenization_spaces": false})", "test.json");
  EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().what());
  return t.ok() ? *t : nullptr;
}

std::string error_of(const json& j) {
  auto t = HfTokenizer::from_json(j.dump(), "", "test.json");
  return t.ok() ? std::string("(loaded)") : t.error().what();
}

using Ids = std::vector<int32_t>;

TEST(SentencePiece, PrependReplaceAndMergesInBothSpellings) {
  for (bool arr : {false, true}) {
    auto t = load(llama2_style(true, true, arr));
    ASSERT_TRUE(t);
    EXPECT_EQ(t->encode("ab", true), (Ids{1, piece(kMeta + "ab")}));
    EXPECT_EQ(t->encode("ab a", false), (Ids{piece(kMeta + "ab"), piece(kMeta + "a")}));
    // Two spaces: "▁ab▁▁a": "▁ a" (rank 0) wins over "▁ ▁" (rank 3): ▁ab, ▁, ▁a.
    EXPECT_EQ(t->encode("ab  a", false), (Ids{piece(kMeta + "ab"), piece(kMeta), piece(kMeta + "a")}));
    // Every section between added tokens gets its own dummy prefix.
    EXPECT_EQ(t->encode("a</s>b", false), (Ids{piece(kMeta + "a"), 2, piece(kMeta), piece("b")}));
  }
}

TEST(SentencePiece, ByteFallbackDecodesAndStripsTheDummyPrefix) {
  auto t = load(llama2_style());
  ASSERT_TRUE(t);
  const Ids euro = {kByte0 + 0xE2, kByte0 + 0x82, kByte0 + 0xAC};
  Ids want = {1, piece(kMeta + "a")};
  want.insert(want.end(), euro.begin(), euro.end());
  EXPECT_EQ(t->encode("a\xE2\x82\xAC", true), want);
  EXPECT_EQ(t->decode(want, true), "a\xE2\x82\xAC");
  EXPECT_EQ(t->decode(want, false), "<s> a\xE2\x82\xAC");
  // A lone lead byte is one U+FFFD; a leading byte-fallback space is stripped like any other.
  EXPECT_EQ(t->decode({kByte0 + 0xE2, piece("a")}, false),
            "\xEF\xBF\xBD"
            "a");
  EXPECT_EQ(t->decode({kByte0 + ' ', piece("a")}, false), "a");
  // The raw bytes (what streaming works on) keep the leading space.
  EXPECT_EQ(t->decode_bytes({piece(kMeta + "a")}, false), " a");
  EXPECT_EQ(t->id_to_token(kByte0 + 0x41), "<0x41>");
}

TEST(SentencePiece, UnknownWithoutByteFallbackIsUnkFusedWhenAsked) {
  auto fused = load(llama2_style(false, true));
  auto plain = load(llama2_style(false, false));
  ASSERT_TRUE(fused && plain);
  EXPECT_EQ(fused->encode("a\xE2\x82\xAC\xE2\x82\xAC"
                          "b",
                          false),
            (Ids{piece(kMeta + "a"), 0, piece("b")}));
  EXPECT_EQ(plain->encode("a\xE2\x82\xAC\xE2\x82\xAC"
                          "b",
                          false),
            (Ids{piece(kMeta + "a"), 0, 0, piece("b")}));
}

TEST(SentencePiece, ByteFallbackNeedsAllByteTokens) {
  json j = llama2_style();
  j["model"]["vocab"].erase("<0x7F>");
  EXPECT_NE(error_of(j).find("<0x7F>"), std::string::npos) << error_of(j);
}

json metaspace_style(const std::string& scheme, bool split) {
  json j = llama2_style();
  j["normalizer"] = nullptr;
  j["pre_tokenizer"] = {
      {"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", scheme}, {"split", split}};
  return j;
}

TEST(SentencePiece, MetaspacePrependSchemes) {
  auto first = load(metaspace_style("first", false));
  auto always = load(metaspace_style("always", false));
  auto never = load(metaspace_style("never", false));
  ASSERT_TRUE(first && always && never);
  EXPECT_EQ(first->encode("a", false), (Ids{piece(kMeta + "a")}));
  EXPECT_EQ(first->encode("<s>a", false), (Ids{1, piece("a")}));  // not the start of the input
  EXPECT_EQ(always->encode("<s>a", false), (Ids{1, piece(kMeta + "a")}));
  EXPECT_EQ(never->encode("a", false), (Ids{piece("a")}));
  EXPECT_EQ(first->encode(" a", false), (Ids{piece(kMeta + "a")}));  // already starts with ▁
  // Older files: add_prefix_space false reads as "never".
  json old = metaspace_style("never", false);
  old["pre_tokenizer"].erase("prepend_scheme");
  old["pre_tokenizer"]["add_prefix_space"] = false;
  auto o = load(old);
  ASSERT_TRUE(o);
  EXPECT_EQ(o->encode("a", false), (Ids{piece("a")}));
}

TEST(SentencePiece, MetaspaceSplitCutsBeforeEachReplacement) {
  auto split = load(metaspace_style("always", true));
  auto whole = load(metaspace_style("always", false));
  ASSERT_TRUE(split && whole);
  // "▁a▁▁b": split -> "▁a", "▁", "▁b" (no ▁▁ merge across words); whole -> ▁a, ▁▁, b.
  EXPECT_EQ(split->encode("a  b", false), (Ids{piece(kMeta + "a"), piece(kMeta), piece(kMeta), piece("b")}));
  EXPECT_EQ(whole->encode("a  b", false), (Ids{piece(kMeta + "a"), piece(kMeta + kMeta), piece("b")}));
}

TEST(SentencePiece, MetaspaceDecoderStripsOnlyTheFirstTokensSpace) {
  json j = metaspace_style("first", false);
  j["decoder"] = {
      {"type", "Sequence"},
      {"decoders", json::array({{{"type", "Metaspace"}, {"replacement", kMeta}, {"prepend_scheme", "first"}},
                                {{"type", "ByteFallback"}},
                                {{"type", "Fuse"}}})}};
  auto t = load(j);
  ASSERT_TRUE(t);
  const int32_t a = piece(kMeta + "a"), mm = piece(kMeta + kMeta);
  EXPECT_EQ(t->decode({a, a}, false), "a a");
  EXPECT_EQ(t->decode({1, a}, false), "<s> a");
  EXPECT_EQ(t->decode({1, a}, true), "a");
  EXPECT_EQ(t->decode({mm, a}, false), "  a");            // only one space of the first token goes
  EXPECT_EQ(t->decode({kByte0 + ' ', a}, false), "  a");  // a byte token is not a ▁ token
}

TEST(SentencePiece, SplitMergedBehaviours) {
  auto pre = [](const std::string& behavior) {
    auto p = PreTokenizer::from_json(
        {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", behavior}, {"invert", false}});
    EXPECT_TRUE(p.ok());
    std::vector<std::string_view> out;
    std::deque<std::string> arena;
    EXPECT_TRUE(p->split("a b  c", true, out, arena).ok());
    return std::vector<std::string>(out.begin(), out.end());
  };
  EXPECT_EQ(pre("MergedWithPrevious"), (std::vector<std::string>{"a ", "b ", " ", "c"}));
  EXPECT_EQ(pre("MergedWithNext"), (std::vector<std::string>{"a", " b", " ", " c"}));
  EXPECT_EQ(pre("Isolated"), (std::vector<std::string>{"a", " ", "b", " ", " ", "c"}));
}

TEST(SentencePiece, UnsupportedComponentsAreNamed) {
  json j = llama2_style();
  j["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  EXPECT_NE(error_of(j).find("Precompiled"), std::string::npos) << error_of(j);
  j = llama2_style();
  j["normalizer"] = {{"type", "NFKC"}};
  EXPECT_NE(error_of(j).find("NFKC"), std::string::npos) << error_of(j);
  j = llama2_style();
  j["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(error_of(j).find("WordPiece"), std::string::npos) << error_of(j);
  j = llama2_style();
  j["decoder"]["decoders"] =
      json::array({{{"type", "Strip"}, {"content", " "}, {"start", 1}}, {{"type", "Fuse"}}});
  EXPECT_NE(error_of(j).find("Strip before Fuse"), std::string::npos) << error_of(j);
  j = llama2_style();
  j["pre_tokenizer"] = {{"type", "Punctuation"}};
  EXPECT_NE(error_of(j).find("Punctuation"), std::string::npos) << error_of(j);
  j = llama2_style();
  j["model"]["type"] = "Unigram";
  EXPECT_NE(error_of(j).find("Unigram"), std::string::npos) << error_of(j);
  j = llama2_style();
  j["decoder"] = nullptr;
  EXPECT_NE(error_of(j).find("decoder"), std::string::npos) << error_of(j);
}

}  // namespace
}  // namespace spk::rt
