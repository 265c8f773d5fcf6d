#include "src/util/decimal.h"

#include <limits>

#include "src/util/strings.h"

namespace gputriage {
namespace {

constexpr int kMaxDigits = 19;  // 10^19 < 2^64: accumulating 19 digits cannot overflow uint64

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

std::optional<int64_t> ParseMicrosecondsToNs(std::string_view text) {
  text = TrimAsciiSpace(text);  // raw JSON tokens may carry trailing blanks
  {
    // What Kineto writes, twice per event: up to 16 digits of µs (epoch time in µs
    // has 16) and up to 3 decimals (ns); anything else takes the general path,
    // which gives the same.
    size_t i = 0;
    const size_t n = text.size();
    uint64_t whole = 0;
    while (i < n && i < 17 && IsDigit(text[i])) whole = whole * 10 + static_cast<uint64_t>(text[i++] - '0');
    if (i > 0 && i <= 16) {
      if (i == n) {
        if (auto ns = KinetoMicrosecondsToNs(whole, 0, 0)) return ns;
      } else if (text[i] == '.') {
        const size_t point = i++;
        uint64_t frac = 0;
        while (i < n && i - point <= 3 && IsDigit(text[i])) frac = frac * 10 + static_cast<uint64_t>(text[i++] - '0');
        const auto decimals = static_cast<int>(i - point - 1);
        if (i == n && decimals > 0)
          if (auto ns = KinetoMicrosecondsToNs(whole, frac, decimals)) return ns;
      }
    }
  }
  size_t i = 0;
  const size_t n = text.size();
  bool negative = false;
  if (i < n && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';

  uint64_t mantissa = 0;
  int digits = 0;        // significant digits accumulated in mantissa
  int exponent10 = 0;    // value = mantissa * 10^exponent10 (in µs)
  int round_digit = -1;  // first digit dropped beyond kMaxDigits, for rounding
  bool sticky = false;   // any non-zero digit dropped after round_digit
  bool any_digit = false;

  auto take_digit = [&](int d, bool fractional) {
    any_digit = true;
    if (digits == 0 && d == 0) {  // leading zeros carry no precision
      if (fractional) --exponent10;
      return;
    }
    if (digits < kMaxDigits) {
      mantissa = mantissa * 10 + static_cast<uint64_t>(d);
      ++digits;
      if (fractional) --exponent10;
    } else {
      if (round_digit < 0) round_digit = d;
      else if (d != 0) sticky = true;
      if (!fractional) ++exponent10;
    }
  };

  while (i < n && IsDigit(text[i])) take_digit(text[i++] - '0', false);
  if (i < n && text[i] == '.') {
    ++i;
    while (i < n && IsDigit(text[i])) take_digit(text[i++] - '0', true);
  }
  if (!any_digit) return std::nullopt;
  if (i < n && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < n && (text[i] == '-' || text[i] == '+')) exp_negative = text[i++] == '-';
    if (i >= n || !IsDigit(text[i])) return std::nullopt;
    int exp = 0;
    while (i < n && IsDigit(text[i])) {
      if (exp < 10000) exp = exp * 10 + (text[i] - '0');
      ++i;
    }
    exponent10 += exp_negative ? -exp : exp;
  }
  if (i != n) return std::nullopt;
  if (round_digit >= 5) {
    // Round the kept digits; the dropped tail only matters through its first digit
    // (and a tie cannot arise at the 19th digit of an µs timestamp in practice).
    ++mantissa;
  }
  (void)sticky;

  // Convert µs to ns: shift the decimal exponent by 3.
  int shift = exponent10 + 3;
  if (mantissa == 0) return 0;
  uint64_t value = mantissa;
  if (shift >= 0) {
    for (int k = 0; k < shift; ++k) {
      if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) / 10)
        return std::nullopt;
      value *= 10;
    }
  } else {
    if (shift < -19) return 0;
    uint64_t divisor = 1;
    for (int k = 0; k < -shift; ++k) divisor *= 10;
    const uint64_t quotient = value / divisor;
    const uint64_t remainder = value % divisor;
    value = quotient + (remainder * 2 >= divisor ? 1 : 0);
  }
  if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  const auto signed_value = static_cast<int64_t>(value);
  return negative ? -signed_value : signed_value;
}

std::optional<int64_t> ParseInt64(std::string_view text) {
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';
  if (i >= text.size()) return std::nullopt;
  uint64_t value = 0;
  for (; i < text.size(); ++i) {
    if (!IsDigit(text[i])) return std::nullopt;
    if (value > (static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) - 9) / 10)
      return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  const auto v = static_cast<int64_t>(value);
  return negative ? -v : v;
}

std::optional<int64_t> ParseTrailingInt(std::string_view text) {
  size_t end = text.size();
  while (end > 0 && text[end - 1] == ' ') --end;
  size_t begin = end;
  while (begin > 0 && IsDigit(text[begin - 1])) --begin;
  if (begin == end || end - begin > 18) return std::nullopt;
  return ParseInt64(text.substr(begin, end - begin));
}

}  // namespace gputriage
