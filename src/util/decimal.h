// Exact decimal-to-integer conversion for trace timestamps.
//
// Kineto writes `ts`/`dur` in microseconds as integers (2021), as "us.nnn" decimals
// (2024+) or as floats whose text has more digits than a double keeps (an epoch in
// µs with 3 decimals is 19 significant digits; a double holds ~16). Going through
// double would lose up to 0.25 µs, so we convert the decimal text itself.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace gputriage {

/// Parses a JSON number (or a numeric string) given in microseconds into integer
/// nanoseconds, rounding half away from zero below 1 ns. Accepts a sign, a fraction
/// and an exponent. Returns nullopt for text that is not a number or overflows int64.
std::optional<int64_t> ParseMicrosecondsToNs(std::string_view text);

/// What Kineto writes, already split into digits: `whole` µs (at most 16 digits)
/// and `fraction` of `fraction_digits` decimals (0-3), in ns, exact as integers;
/// nullopt where whole × 1000 + 999 would not fit int64 or there are more
/// decimals (ParseMicrosecondsToNs's general reading then decides). The fast path
/// of ParseMicrosecondsToNs and of the plain-form trace reader.
inline std::optional<int64_t> KinetoMicrosecondsToNs(uint64_t whole, uint64_t fraction, int fraction_digits) {
  constexpr uint64_t kMaxWholeUs = (static_cast<uint64_t>(INT64_MAX) - 999) / 1000;
  constexpr uint64_t kNsPerDecimalUnit[] = {1000, 100, 10, 1};
  if (whole > kMaxWholeUs || fraction_digits < 0 || fraction_digits > 3) return std::nullopt;
  return static_cast<int64_t>(whole * 1000 + fraction * kNsPerDecimalUnit[fraction_digits]);
}

/// Parses a plain decimal integer (optional sign) with no other characters.
std::optional<int64_t> ParseInt64(std::string_view text);

/// Extracts the trailing integer of texts like "stream 7" or "25738"; nullopt if none.
std::optional<int64_t> ParseTrailingInt(std::string_view text);

}  // namespace gputriage
