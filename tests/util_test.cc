#include <gtest/gtest.h>

#include "src/util/text_encoding.h"

#include <random>
#include <string>

#include <zlib.h>

#include "src/analysis/intervals.h"
#include "src/util/byte_source.h"
#include "src/util/decimal.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

TEST(ParseMicrosecondsToNs, KinetoFormsMatchTheGeneralReading) {
  // The fast path (up to 16 digits, up to 3 decimals) against the same value
  // written so that only the general path reads it (an exponent).
  std::mt19937_64 rng(25);
  for (int i = 0; i < 20000; ++i) {
    const int64_t whole = static_cast<int64_t>(rng() % (i % 2 == 0 ? 1'000'000'000'000'000ULL : 9'223'372'036'854'774ULL));
    const int decimals = static_cast<int>(rng() % 4);
    const int64_t frac = decimals == 0 ? 0 : static_cast<int64_t>(rng() % (decimals == 1 ? 10 : decimals == 2 ? 100 : 1000));
    std::string text = std::to_string(whole);
    if (decimals > 0) {
      std::string f = std::to_string(frac);
      text += '.';
      text.append(static_cast<size_t>(decimals) - f.size(), '0');
      text += f;
    }
    int64_t scale = 1;
    for (int k = decimals; k < 3; ++k) scale *= 10;
    const int64_t want = whole * 1000 + frac * scale;
    ASSERT_EQ(ParseMicrosecondsToNs(text), want) << text;
    ASSERT_EQ(ParseMicrosecondsToNs(text + "e0"), want) << text;
    ASSERT_EQ(ParseMicrosecondsToNs(text + " "), want) << text;
  }
  EXPECT_EQ(ParseMicrosecondsToNs("5."), ParseMicrosecondsToNs("5e0"));
  EXPECT_EQ(ParseMicrosecondsToNs("1.2345"), 1235);  // a fourth decimal: rounded by the general path
  EXPECT_EQ(ParseMicrosecondsToNs("1234567890123456"), 1234567890123456000);
  // Around the largest whole µs whose ns fit in int64 with any 3 decimals: the
  // fast path stops there, the general path goes on to the limit and no further.
  EXPECT_EQ(ParseMicrosecondsToNs("9223372036854774.999"), 9223372036854774999);
  EXPECT_EQ(ParseMicrosecondsToNs("9223372036854775.807"), INT64_MAX);
  EXPECT_EQ(ParseMicrosecondsToNs("9223372036854775.808"), std::nullopt);
  EXPECT_EQ(ParseMicrosecondsToNs("9999999999999999"), std::nullopt);
  EXPECT_EQ(ParseMicrosecondsToNs("12345678901234567"), std::nullopt);
}

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

// Issue 53: the text report in a non-UTF-8 locale wrote UTF-8 symbols.
TEST(TextEncoding, TheLocaleNamesTheTerminalsEncoding) {
  EXPECT_EQ(LocaleTextEncoding(nullptr, nullptr, "en_US.UTF-8"), TextEncoding::kUtf8);
  EXPECT_EQ(LocaleTextEncoding(nullptr, nullptr, "C.utf8"), TextEncoding::kUtf8);
  EXPECT_EQ(LocaleTextEncoding(nullptr, nullptr, "C"), TextEncoding::kAscii);
  EXPECT_EQ(LocaleTextEncoding(nullptr, nullptr, "POSIX"), TextEncoding::kAscii);
  EXPECT_EQ(LocaleTextEncoding(nullptr, nullptr, "de_DE.ISO-8859-1"), TextEncoding::kLatin1);
  EXPECT_EQ(LocaleTextEncoding(nullptr, nullptr, "de_DE.iso885915@euro"), TextEncoding::kLatin1);
  EXPECT_EQ(LocaleTextEncoding(nullptr, nullptr, "ja_JP.eucJP"), TextEncoding::kAscii);
  EXPECT_EQ(LocaleTextEncoding("C", "en_US.UTF-8", "en_US.UTF-8"), TextEncoding::kAscii);  // LC_ALL first
  EXPECT_EQ(LocaleTextEncoding("", "de_DE.ISO-8859-1", "en_US.UTF-8"), TextEncoding::kLatin1);  // empty is unset
  EXPECT_EQ(LocaleTextEncoding(nullptr, nullptr, nullptr), TextEncoding::kUtf8);  // nothing set: today's terminals
}

TEST(TextEncoding, SymbolsAreSpelledForTheTerminal) {
  const std::string report = "16.00 ms \u2192 26.00 ms \u2014 3 \u00d7 1.5 \u00b5s \u00b7 \u2265 5% \u00b1 2 caf\u00e9 \u6a21\u578b";
  EXPECT_EQ(ForTextEncoding(report, TextEncoding::kUtf8), report);
  EXPECT_EQ(ForTextEncoding(report, TextEncoding::kAscii), "16.00 ms -> 26.00 ms - 3 x 1.5 us * >= 5% +/- 2 caf? ??");
  // Latin-1 keeps its own characters as single bytes (×, µ, ·, ±, é) and spells the rest.
  EXPECT_EQ(ForTextEncoding(report, TextEncoding::kLatin1),
            "16.00 ms -> 26.00 ms - 3 \xd7 1.5 \xb5s \xb7 >= 5% \xb1 2 caf\xe9 ??");
  EXPECT_EQ(ForTextEncoding("bad \xff byte", TextEncoding::kAscii), "bad ? byte");
}

}  // namespace
}  // namespace gputriage

namespace gputriage {
namespace {

TEST(Printable, ControlCharactersCannotSteerTheTerminal) {
  // Issue 12, item 13: names, tags, commands and file names were printed raw.
  EXPECT_EQ(Printable("run\x1b[31mred\nnext\tcol\x7f"), "run\\x1b[31mred\\nnext\\tcol\\x7f");
  EXPECT_EQ(Printable("csi \xc2\x9b" "2J"), "csi \\u009b2J");  // C1 CSI in UTF-8
  // UTF-8 text stays; a stray byte (a server's binary reply) is escaped, so a message stays valid text.
  EXPECT_EQ(Printable("caf\xc3\xa9 \xff"), "caf\xc3\xa9 \\xff");
  EXPECT_EQ(Printable("\xe2\x82"), "\\xe2\\x82");  // a sequence cut short
  EXPECT_EQ(Printable(std::string("a\0b", 3)), "a\\x00b");
  // Bidirectional controls (U+202E RIGHT-TO-LEFT OVERRIDE, U+2066 LRI, U+061C ALM) show as escapes.
  EXPECT_EQ(Printable("gemm\xe2\x80\xae" "elif\xe2\x81\xa6" "x\xd8\x9c"), "gemm\\u202eelif\\u2066x\\u061c");
  EXPECT_EQ(Printable("\xe2\x80\x94 dash"), "\xe2\x80\x94 dash");  // other punctuation stays
}

}  // namespace
}  // namespace gputriage

namespace gputriage {
namespace {

std::string ReadAll(ByteSource& source, size_t chunk = 3) {
  std::string out(chunk, '\0'), all;
  while (true) {
    auto n = source.Read(out.data(), out.size());
    if (!n.ok() || *n == 0) break;
    all.append(out.data(), *n);
  }
  return all;
}

TEST(TextDecoding, Utf16WithSurrogatesBecomesUtf8) {
  // "a\u00e9\u20ac\U0001F600" in UTF-16LE with a BOM, read in 3-byte slices so
  // code units and surrogate pairs straddle reads.
  const std::string le("\xff\xfe" "a\0" "\xe9\0" "\xac\x20" "\x3d\xd8\x00\xde", 12);
  auto source = MemorySource("t", le.data(), le.size());
  EXPECT_EQ(ReadAll(*source), "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  const std::string be("\xfe\xff" "\0a" "\xd8\x3d", 6);  // a lone high surrogate at the end
  source = MemorySource("t", be.data(), be.size());
  EXPECT_EQ(ReadAll(*source), "a\xef\xbf\xbd");
}

TEST(TextDecoding, Utf8BomIsDroppedAndOtherTextUntouched) {
  const std::string bom = "\xef\xbb\xbf{\"traceEvents\": []}";
  auto source = MemorySource("t", bom.data(), bom.size());
  EXPECT_EQ(ReadAll(*source), "{\"traceEvents\": []}");
  const std::string plain = "ab";  // shorter than the 4 bytes the detection looks at
  source = MemorySource("t", plain.data(), plain.size());
  EXPECT_EQ(ReadAll(*source), "ab");
}

TEST(PeekHead, TheHeadIsServedAgainAndDamageIsNotLost) {
  // A gzip stream cut in the middle: the head shows the text, and the reader
  // still meets the cut after it instead of a clean end.
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "line " + std::to_string(i) + "\n";
  uLongf size = compressBound(text.size()) + 64;
  std::string gz(size, '\0');
  z_stream zs{};
  ASSERT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  zs.next_in = reinterpret_cast<Bytef*>(text.data());
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(gz.data());
  zs.avail_out = static_cast<uInt>(gz.size());
  ASSERT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  gz.resize(zs.total_out / 2);
  deflateEnd(&zs);
  auto source = MemorySource("cut.gz", gz.data(), gz.size());
  auto head = PeekHead(source, 1 << 20);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->substr(0, 7), "line 0\n");
  std::string buffer(1 << 16, '\0'), again;
  Status end;
  while (true) {
    auto n = source->Read(buffer.data(), buffer.size());
    if (!n.ok()) {
      end = n.status();
      break;
    }
    if (*n == 0) break;
    again.append(buffer.data(), *n);
  }
  EXPECT_EQ(again, *head);
  EXPECT_EQ(end.code(), StatusCode::kDataLoss) << end.message();
}

}  // namespace
}  // namespace gputriage
