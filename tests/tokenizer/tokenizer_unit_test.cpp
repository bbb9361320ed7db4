// The tokenizer's pieces in isolation: regex translation, added-token splitting, UTF-8 handling,
// BPE merge order on a hand-made tokenizer.json, post-processor template, load errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "runtime/tokenizer/added_tokens.h"
#include "runtime/tokenizer/byte_level.h"
#include "runtime/tokenizer/hf_tokenizer.h"
#include "runtime/tokenizer/regex_split.h"
#include "runtime/tokenizer/utf8.h"

namespace spk::rt {
namespace {

std::vector<std::string> matches(const std::string& onig, const std::string& text) {
  auto re = Regex::compile(oniguruma_to_pcre2(onig));
  EXPECT_TRUE(re.ok()) << (re.ok() ? "" : re.error().what());
  std::vector<std::string> out;
  if (!re.ok()) return out;
  EXPECT_TRUE(
      (*re)->for_each_match(text, [&](size_t b, size_t e) { out.push_back(text.substr(b, e - b)); }).ok());
  return out;
}

TEST(Regex, CaseInsensitiveGroupFoldsAsciiOnly) {
  EXPECT_EQ(oniguruma_to_pcre2("(?i:'s|'t)"), "(?:'[sS]|'[tT])");
  EXPECT_EQ(matches("(?i:'s)", "'S 's '\xC5\xBF"), (std::vector<std::string>{"'S", "'s"}));  // not long s
}

TEST(Regex, WhiteSpaceIsUnicodeWhiteSpace) {
  // U+0085 (NEL) is White_Space: \s matches it, unlike PCRE2's own \s.
  EXPECT_EQ(matches("\\s+", "a\xC2\x85 b"), (std::vector<std::string>{"\xC2\x85 "}));
  EXPECT_EQ(matches("[^\\s\\p{L}]+", "ab,\xC2\x85;"), (std::vector<std::string>{",", ";"}));
  EXPECT_EQ(matches("\\s+(?!\\S)|\\s+", "a   b"), (std::vector<std::string>{"  ", " "}));
}

TEST(Regex, KnowsCodePointsNewerThanPcre2) {
  // U+1FAF7 LEFTWARDS PUSHING HAND (Unicode 15.0, So) is a symbol for the JS reference.
  EXPECT_EQ(matches(" ?[\\p{P}\\p{S}]+", " \xF0\x9F\xAB\xB7"),
            (std::vector<std::string>{" \xF0\x9F\xAB\xB7"}));
  EXPECT_EQ(matches("\\p{So}", "\xF0\x9F\xAB\xB7").size(), 1u);
}

TEST(Regex, EmptyMatchesAdvanceOneCodePoint) {
  EXPECT_EQ(matches("x*", "\xE4\xB8\xADx").size(), 3u);  // "", "x", "" as JS matchAll
}

TEST(AddedTokens, LongestMatchLeftToRight) {
  AddedTokenSplitter s({{"<|a|>", 1}, {"<|a|><|b|>", 2}, {"<|b|>", 3}});
  auto secs = s.split("x<|a|><|b|>y<|b|><|a|");
  ASSERT_EQ(secs.size(), 5u);
  EXPECT_EQ(secs[0].text, "x");
  EXPECT_EQ(secs[1].id, 2);
  EXPECT_EQ(secs[2].text, "y");
  EXPECT_EQ(secs[3].id, 3);
  EXPECT_EQ(secs[4].text, "<|a|");
  EXPECT_EQ(secs[4].id, -1);
}

TEST(AddedTokens, LstripRstripTrimNeighbours) {
  AddedToken t{"<m>", 7, true, true, true};
  auto secs = AddedTokenSplitter({t}).split("a \t<m>\n b");
  ASSERT_EQ(secs.size(), 3u);
  EXPECT_EQ(secs[0].text, "a");
  EXPECT_EQ(secs[2].text, "b");
}

TEST(Utf8, SanitizeFollowsWhatwg) {
  EXPECT_EQ(utf8::sanitize("a\xFF"
                           "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(utf8::sanitize("\xE2\x82"), "\xEF\xBF\xBD");                              // truncated: one U+FFFD
  EXPECT_EQ(utf8::sanitize("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(utf8::incomplete_tail("ab\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8::incomplete_tail("ab\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(utf8::incomplete_tail("ab\x80"), 0u);
}

TEST(ByteLevel, RoundTripsAllBytes) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string raw;
  ASSERT_TRUE(byte_level::decode(byte_level::encode(all), &raw));
  EXPECT_EQ(raw, all);
  EXPECT_EQ(byte_level::encode(" "), "\xC4\xA0");  // Ġ
}

// A tiny byte-level BPE tokenizer.json.
std::string tiny_json(bool ignore_merges) {
  using nlohmann::json;
  json vocab = json::object();
  int id = 0;
  for (const char* t : {"a", "b", "c", "\xC4\xA0", "ab", "bc", "abc",
                        "\xC4\xA0"
                        "a",
                        "cab"})
    vocab[t] = id++;
  json j = {{"normalizer", nullptr},
            {"pre_tokenizer",
             {{"type", "Sequence"},
              {"pretokenizers",
               json::array({{{"type", "Split"},
                             {"pattern", {{"Regex", " ?\\p{L}+|\\s+"}}},
                             {"behavior", "Isolated"},
                             {"invert", false}},
                            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}}},
            {"post_processor",
             {{"type", "TemplateProcessing"},
              {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                      {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}}},
            {"decoder", {{"type", "ByteLevel"}}},
            {"added_tokens",
             json::array({{{"id", 9}, {"content", "<s>"}, {"special", true}, {"normalized", false}}})},
            {"model",
             {{"type", "BPE"},
              {"ignore_merges", ignore_merges},
              {"vocab", vocab},
              {"merges", json::array({"b c", "a b", "ab c", "\xC4\xA0 a"})}}}};
  return j.dump();
}

TEST(Bpe, LowestRankFirstThenLeftmost) {
  auto t = HfTokenizer::from_json(tiny_json(false), "{\"clean_up_tokenization_spaces\": false}", "tiny");
  ASSERT_TRUE(t.ok()) << t.error().what();
  // "abc": b+c (rank 0) first -> a, bc; "ab c" never applies; "cab": no merge to "cab" exists.
  EXPECT_EQ((*t)->encode("abc", false), (std::vector<int32_t>{0, 5}));
  EXPECT_EQ((*t)->encode("cab", false), (std::vector<int32_t>{2, 4}));
  EXPECT_EQ((*t)->encode(" abc", true), (std::vector<int32_t>{9, 7, 5}));  // BOS from the template
  EXPECT_EQ((*t)->encode("<s>ab", false), (std::vector<int32_t>{9, 4}));
  EXPECT_EQ((*t)->decode({9, 7, 5}, true), " abc");
  EXPECT_EQ((*t)->decode({9, 7, 5}, false), "<s> abc");
  EXPECT_TRUE((*t)->is_special(9));
  EXPECT_EQ((*t)->vocab_size(), 10u);
  EXPECT_EQ((*t)->token_to_id("\xC4\xA0"
                              "a"),
            7);
  EXPECT_EQ((*t)->token_to_id("zzz"), -1);
}

TEST(Bpe, IgnoreMergesTakesWholeWordFromVocab) {
  auto t = HfTokenizer::from_json(tiny_json(true), "", "tiny");
  ASSERT_TRUE(t.ok()) << t.error().what();
  EXPECT_EQ((*t)->encode("cab", false), (std::vector<int32_t>{8}));
  EXPECT_EQ((*t)->encode("abc", false), (std::vector<int32_t>{6}));
}

TEST(Load, ErrorsNameThePathAndTheFix) {
  auto r = Tokenizer::load("/nonexistent/model");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("/nonexistent/model"), std::string::npos);
  EXPECT_FALSE(r.error().fix.empty());
  auto bad = HfTokenizer::from_json(R"({"model": {"type": "Unigram"}, "decoder": null})", "", "x.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("Unigram"), std::string::npos);
}

// Ids are integers in range before any conversion (found by scripts/fuzz.sh: a float id 5e98 in
// added_tokens was undefined behaviour under UBSan; a huge id a huge allocation).
TEST(Load, TokenIdsMustBeIntegersInRange) {
  using nlohmann::json;
  for (const char* id : {"5e98", "1.5", "-3", "16777216", "\"7\"", "[1]"}) {
    json j = json::parse(tiny_json(false));
    j["added_tokens"][0]["id"] = json::parse(id);
    auto t = HfTokenizer::from_json(j.dump(), "", "x.json");
    ASSERT_FALSE(t.ok()) << id;
    EXPECT_NE(t.error().message.find("not an integer in [0, 16777216)"), std::string::npos)
        << t.error().message;
    j = json::parse(tiny_json(false));
    j["model"]["vocab"]["a"] = json::parse(id);
    t = HfTokenizer::from_json(j.dump(), "", "x.json");
    ASSERT_FALSE(t.ok()) << id;
    EXPECT_NE(t.error().message.find("token a has id"), std::string::npos) << t.error().message;
  }
}

}  // namespace
}  // namespace spk::rt
