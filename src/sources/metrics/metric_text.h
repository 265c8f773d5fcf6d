// Parsing pieces shared by the metric-log readers: numbers with units, the
// placeholders tools print for missing values, and the timestamp formats
// nvidia-smi, dmon and shell loggers write.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gputriage/model.h"

namespace gputriage::metric_text {

/// "[N/A]", "N/A", "-", "", "[Not Supported]", "[Unknown Error]", "[GPU is lost]", ...
bool IsMissing(std::string_view token);
/// "[GPU is lost]" / "GPU is lost": the device fell off the bus.
bool IsGpuLost(std::string_view token);

/// A plain decimal number (optionally signed, with exponent). Hex "0x..." too.
std::optional<double> ParseNumber(std::string_view token);

/// A number followed by an optional unit, "631.95 W", "81559 MiB", "45 %".
struct ValueWithUnit {
  double value = 0;
  std::string_view unit;  // trimmed, may be empty
};
std::optional<ValueWithUnit> ParseValueWithUnit(std::string_view token);

/// Multiplier from a memory/bandwidth unit to bytes (or bytes/s): "MiB" → 2^20,
/// "MB" → 10^6, "KB/s" → 10^3. 0 when not a memory unit.
double BytesPerUnit(std::string_view unit);
/// A memory reading in bytes: its unit's multiplier, MiB where it has none
/// (nvidia-smi's own unit for memory).
inline double MemoryBytes(const ValueWithUnit& v) {
  const double per = BytesPerUnit(v.unit);
  return v.value * (per > 0 ? per : 1048576.0);
}
/// The number of a token in exactly `unit` ("13W", "58C", "48%"); nothing otherwise.
inline std::optional<double> ValueIn(std::string_view token, std::string_view unit) {
  const auto v = ParseValueWithUnit(token);
  return v && v->unit == unit ? std::optional<double>(v->value) : std::nullopt;
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d);

/// Parses the timestamp forms the metric tools write, returning ns since the
/// epoch. Times without a zone are taken as given (local time of the logger).
///   2026/07/14 08:12:38.696     nvidia-smi --query-gpu timestamp
///   2026-07-14 08:12:38[.fff]   ISO-like, also with 'T' and 'Z' / ±HH:MM
///   20260714 08:12:38           dmon -o DT (as two fields joined by a space)
///   Tue Jul 14 08:12:38 2026    nvidia-smi -q "Timestamp"
///   1752480758.696              epoch seconds (>= 10^9)
std::optional<TimeNs> ParseTimestamp(std::string_view text);

/// "HH:MM:SS[.fff]" → ns since midnight.
std::optional<TimeNs> ParseTimeOfDay(std::string_view text);

/// Splits on `sep`, trimming ASCII spaces around each field.
void SplitTrimmed(std::string_view line, char sep, std::vector<std::string_view>& out);
/// Splits on runs of spaces/tabs.
void SplitWhitespace(std::string_view line, std::vector<std::string_view>& out);

}  // namespace gputriage::metric_text
