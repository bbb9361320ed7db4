#include "runtime/sampler/stop_checker.h"

#include <gtest/gtest.h>

namespace spk::rt {
namespace {

TEST(StopChecker, StopSplitAcrossPushesIsNeverEmitted) {
  StopChecker sc({"##END"});
  auto a = sc.push("Hello ##");
  EXPECT_EQ(a.emit, "Hello ");
  EXPECT_FALSE(a.stopped);
  EXPECT_EQ(sc.held(), 2u);
  auto b = sc.push("EN");
  EXPECT_EQ(b.emit, "");
  auto c = sc.push("D and more");
  EXPECT_TRUE(c.stopped);
  EXPECT_EQ(c.emit, "");
  EXPECT_EQ(sc.matched(), "##END");
  EXPECT_TRUE(sc.push("x").stopped);
  EXPECT_EQ(sc.flush(), "");
}

TEST(StopChecker, FalseStartIsReleased) {
  StopChecker sc({"##END"});
  EXPECT_EQ(sc.push("a#").emit, "a");
  EXPECT_EQ(sc.push("#E").emit, "");
  EXPECT_EQ(sc.push("X").emit, "##EX");
  EXPECT_EQ(sc.push("#").emit, "");
  EXPECT_EQ(sc.flush(), "#");  // end of stream: held text is output
}

TEST(StopChecker, TextBeforeStopInSamePush) {
  StopChecker sc({"\n\n", "User:"});
  auto o = sc.push("answer is 4\n\nUser: next");
  EXPECT_TRUE(o.stopped);
  EXPECT_EQ(o.emit, "answer is 4");
  EXPECT_EQ(sc.matched(), "\n\n");
}

TEST(StopChecker, EarliestOfSeveralStops) {
  StopChecker sc({"cd", "b"});
  auto o = sc.push("abcd");
  EXPECT_EQ(o.emit, "a");
  EXPECT_EQ(sc.matched(), "b");
}

TEST(StopChecker, CharByCharEqualsWhole) {
  const std::string text = "the quick <|im_end|> brown";
  StopChecker whole({"<|im_end|>"});
  StopChecker chars({"<|im_end|>"});
  const std::string w = whole.push(text).emit;
  std::string c;
  for (char ch : text) {
    auto o = chars.push(std::string(1, ch));
    c += o.emit;
    if (o.stopped) break;
  }
  EXPECT_EQ(w, "the quick ");
  EXPECT_EQ(c, w);
}

TEST(StopChecker, NoStopsPassesThrough) {
  StopChecker sc({});
  EXPECT_EQ(sc.push("abc").emit, "abc");
  EXPECT_EQ(sc.held(), 0u);
}

TEST(CheckStopToken, IdsEosAndLength) {
  SamplingParams p;
  p.max_tokens = 3;
  p.stop_token_ids = {7};
  const std::vector<int32_t> eos = {2};
  EXPECT_EQ(check_stop_token(p, 5, 1, eos), FinishReason::none);
  EXPECT_EQ(check_stop_token(p, 7, 1, eos), FinishReason::stop);
  EXPECT_EQ(check_stop_token(p, 2, 1, eos), FinishReason::stop);
  EXPECT_EQ(check_stop_token(p, 5, 3, eos), FinishReason::length);
  EXPECT_EQ(check_stop_token(p, 2, 3, eos), FinishReason::stop);  // stop wins over length
  p.ignore_eos = true;
  EXPECT_EQ(check_stop_token(p, 2, 1, eos), FinishReason::none);
  EXPECT_EQ(check_stop_token(p, 7, 1, eos), FinishReason::stop);  // explicit stop ids still stop
}

}  // namespace
}  // namespace spk::rt
