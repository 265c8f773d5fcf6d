#include <gtest/gtest.h>

#include "src/analysis/intervals.h"
#include "src/util/decimal.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

TEST(ParseMicrosecondsToNs, IntegerMicroseconds) {
  EXPECT_EQ(ParseMicrosecondsToNs("1623142623460111"), 1623142623460111000LL);
  EXPECT_EQ(ParseMicrosecondsToNs("25"), 25000);
  EXPECT_EQ(ParseMicrosecondsToNs("0"), 0);
}

TEST(ParseMicrosecondsToNs, DecimalsAreExactBeyondDoublePrecision) {
  // 19 significant digits: a double would round this to 1712195495519695.75.
  EXPECT_EQ(ParseMicrosecondsToNs("1712195495519695.812"), 1712195495519695812LL);
  EXPECT_EQ(ParseMicrosecondsToNs("4203669604595.407"), 4203669604595407LL);
  EXPECT_EQ(ParseMicrosecondsToNs("4.928"), 4928);
}

TEST(ParseMicrosecondsToNs, FractionalNanosecondsRound) {
  EXPECT_EQ(ParseMicrosecondsToNs("0.0004"), 0);
  EXPECT_EQ(ParseMicrosecondsToNs("0.0005"), 1);
  EXPECT_EQ(ParseMicrosecondsToNs("1.2345"), 1235);
}

TEST(ParseMicrosecondsToNs, ExponentsSignsAndBlanks) {
  EXPECT_EQ(ParseMicrosecondsToNs("1e-05"), 0);
  EXPECT_EQ(ParseMicrosecondsToNs("2.5E+3"), 2500000);
  EXPECT_EQ(ParseMicrosecondsToNs("-3.5"), -3500);
  EXPECT_EQ(ParseMicrosecondsToNs("  12 \n"), 12000);
}

TEST(ParseMicrosecondsToNs, RejectsNonNumbersAndOverflow) {
  EXPECT_FALSE(ParseMicrosecondsToNs(""));
  EXPECT_FALSE(ParseMicrosecondsToNs("abc"));
  EXPECT_FALSE(ParseMicrosecondsToNs("1.2.3"));
  EXPECT_FALSE(ParseMicrosecondsToNs("1e"));
  EXPECT_FALSE(ParseMicrosecondsToNs("1e30"));
  EXPECT_FALSE(ParseMicrosecondsToNs("99999999999999999999"));
}

TEST(ParseTrailingInt, StreamNames) {
  EXPECT_EQ(ParseTrailingInt("stream 7"), 7);
  EXPECT_EQ(ParseTrailingInt("25738"), 25738);
  EXPECT_FALSE(ParseTrailingInt("Traces"));
}

TEST(Intervals, MergeIntersectSubtract) {
  using intervals::List;
  const List merged = intervals::Merge({{5, 8}, {0, 2}, {1, 3}, {8, 9}, {4, 4}});
  EXPECT_EQ(merged, (List{{0, 3}, {5, 9}}));
  EXPECT_EQ(intervals::Sum(merged), 7);
  EXPECT_EQ(intervals::Intersect(merged, List{{2, 6}}), (List{{2, 3}, {5, 6}}));
  EXPECT_EQ(intervals::Subtract(List{{0, 10}}, merged), (List{{3, 5}, {9, 10}}));
  EXPECT_EQ(intervals::OverlapWith(merged, {2, 6}), 2);
  EXPECT_TRUE(intervals::Subtract(List{}, merged).empty());
}

}  // namespace
}  // namespace gputriage

namespace gputriage {
namespace {

TEST(Printable, ControlCharactersCannotSteerTheTerminal) {
  // Issue 12, item 13: names, tags, commands and file names were printed raw.
  EXPECT_EQ(Printable("run\x1b[31mred\nnext\tcol\x7f"), "run\\x1b[31mred\\nnext\\tcol\\x7f");
  EXPECT_EQ(Printable("csi \xc2\x9b" "2J"), "csi \\u009b2J");  // C1 CSI in UTF-8
  EXPECT_EQ(Printable("caf\xc3\xa9 \xff"), "caf\xc3\xa9 \xff");  // text and stray bytes stay as they are
  EXPECT_EQ(Printable(std::string("a\0b", 3)), "a\\x00b");
}

}  // namespace
}  // namespace gputriage
