// Numbers for a reader: durations in the unit that keeps them readable, GPU time
// that does not round a short run to "0.00 GPU-h", thresholds without sixteen
// digits. The JSON keeps the exact values; these are for text.
#pragma once

#include <time.h>

#include <cmath>
#include <cstdint>
#include <ctime>
#include <string>

#include <fmt/format.h>

namespace gputriage {

/// A wall-clock time in the local zone to the minute ("2026-11-30 18:02"); "-" when unknown.
inline std::string FormatLocalMinute(int64_t ns) {
  char text[32] = "-";
  const time_t seconds = static_cast<time_t>(ns / 1'000'000'000);
  struct tm local {};
  if (ns > 0 && localtime_r(&seconds, &local) != nullptr) std::strftime(text, sizeof text, "%Y-%m-%d %H:%M", &local);
  return text;
}

/// 850 µs, 42 ms, 2.5 s, 4.2 min, 3.1 h.
inline std::string FormatSeconds(double seconds) {
  if (std::isnan(seconds)) return "n/a";
  const double a = std::fabs(seconds);
  if (a == 0) return "0 s";
  if (a < 1e-3) return fmt::format("{:.0f} µs", seconds * 1e6);
  if (a < 1) return fmt::format("{:.{}f} ms", seconds * 1e3, a < 0.01 ? 1 : 0);
  if (a < 60) return fmt::format("{:.{}f} s", seconds, a < 10 ? 1 : 0);
  if (a < 3600) return fmt::format("{:.1f} min", seconds / 60);
  return fmt::format("{:.{}f} h", seconds / 3600, a < 36000 ? 2 : 1);
}

/// GPU time: "36 GPU-s", "4.5 GPU-min", "0.83 GPU-h".
inline std::string FormatGpuTime(double hours) {
  if (std::isnan(hours)) return "n/a";
  const double seconds = hours * 3600;
  if (seconds < 60) return fmt::format("{:.{}f} GPU-s", seconds, seconds < 10 ? 1 : 0);
  if (seconds < 3600) return fmt::format("{:.1f} GPU-min", seconds / 60);
  return fmt::format("{:.2f} GPU-h", hours);
}

/// A number as a person reads it: whole numbers whole, otherwise 3-4 significant
/// digits (95.4, 249.0, 0.0123), never a binary fraction's full expansion.
inline std::string FormatReadable(double v) {
  if (std::isnan(v)) return "n/a";
  const double a = std::fabs(v);
  if (a < 1e15 && v == std::floor(v)) return fmt::format("{:.0f}", v);
  if (a >= 1000) return fmt::format("{:.0f}", v);
  if (a >= 10) return fmt::format("{:.1f}", v);
  if (a >= 1) return fmt::format("{:.2f}", v);
  return fmt::format("{:.3g}", v);
}

}  // namespace gputriage
