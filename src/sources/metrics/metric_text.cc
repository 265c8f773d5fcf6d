#include "src/sources/metrics/metric_text.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <utility>

#include "src/util/strings.h"

namespace gputriage::metric_text {

bool IsMissing(std::string_view token) {
  token = TrimAsciiSpace(token);
  if (token.empty() || token == "-" || token == "N/A" || token == "n/a" || token == "NA") return true;
  // nvidia-smi brackets every non-value: [N/A], [Not Supported], [Unknown Error],
  // [Insufficient Permissions], [GPU is lost], [Requested functionality has been deprecated].
  if (token.front() == '[' && token.back() == ']') return true;
  return token == "Not Supported" || token == "Unknown Error" || token == "GPU is lost";
}

bool IsGpuLost(std::string_view token) { return Contains(token, "GPU is lost") || Contains(token, "GPU requires reset"); }

namespace {

constexpr double kPow10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};

/// Plain decimals ("612.35", "-3", "0.000008") without exponent: the digits form
/// an integer below 2^53 and the scale a power of ten exactly representable, so
/// one correctly rounded division gives the same double as a full parse
/// (Clinger's fast path). Nearly every metric value takes this path.
std::optional<double> FastDecimal(std::string_view t) {
  size_t i = 0;
  bool negative = false;
  if (t[0] == '-') {
    negative = true;
    i = 1;
  }
  uint64_t mantissa = 0;
  int digits = 0, fraction = 0;
  bool dot = false;
  for (; i < t.size(); ++i) {
    const char c = t[i];
    if (c >= '0' && c <= '9') {
      mantissa = mantissa * 10 + static_cast<uint64_t>(c - '0');
      if (mantissa != 0 || dot) ++digits;
      if (dot) ++fraction;
      if (digits > 15 || fraction > 15) return std::nullopt;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      return std::nullopt;
    }
  }
  if (t.size() == (negative ? 1u : 0u) || (dot && t.size() == (negative ? 2u : 1u))) return std::nullopt;
  // Integers (percent, MiB, MHz) need no division at all.
  const double v = fraction == 0 ? static_cast<double>(mantissa) : static_cast<double>(mantissa) / kPow10[fraction];
  return negative ? -v : v;
}

}  // namespace

std::optional<double> ParseNumber(std::string_view token) {
  token = TrimAsciiSpace(token);
  if (token.empty()) return std::nullopt;
  if (auto fast = FastDecimal(token)) return fast;
  if (token.size() > 2 && token[0] == '0' && (token[1] == 'x' || token[1] == 'X')) {
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(token.data() + 2, token.data() + token.size(), v, 16);
    if (ec != std::errc() || p != token.data() + token.size()) return std::nullopt;
    return static_cast<double>(v);
  }
  if (token.front() == '+') token.remove_prefix(1);
  double v = 0;
  auto [p, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || p != token.data() + token.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<ValueWithUnit> ParseValueWithUnit(std::string_view token) {
  token = TrimAsciiSpace(token);
  size_t i = 0;
  while (i < token.size() && (token[i] == '-' || token[i] == '+' || token[i] == '.' ||
                              (token[i] >= '0' && token[i] <= '9') || token[i] == 'e' || token[i] == 'E')) {
    // An 'e' only belongs to the number when followed by a digit or sign.
    if ((token[i] == 'e' || token[i] == 'E') &&
        !(i + 1 < token.size() && ((token[i + 1] >= '0' && token[i + 1] <= '9') || token[i + 1] == '-' || token[i + 1] == '+')))
      break;
    ++i;
  }
  if (i == 0) return std::nullopt;
  auto number = ParseNumber(token.substr(0, i));
  if (!number) return std::nullopt;
  // A unit is a word ("%", "MiB", "W", "MHz", "KB/s", "°C"): "37 -250 %" is not
  // 37 of some unit "-250 %", it is unreadable.
  const std::string_view unit = TrimAsciiSpace(token.substr(i));
  for (char c : unit)
    if (!(std::isalpha(static_cast<unsigned char>(c)) || c == '%' || c == '/' || static_cast<unsigned char>(c) >= 0x80))
      return std::nullopt;
  return ValueWithUnit{*number, unit};
}

double BytesPerUnit(std::string_view unit) {
  if (EndsWith(unit, "/s")) unit.remove_suffix(2);
  if (unit == "B" || unit == "bytes") return 1;
  if (unit == "KiB") return 1024.0;
  if (unit == "MiB") return 1024.0 * 1024.0;
  if (unit == "GiB") return 1024.0 * 1024.0 * 1024.0;
  if (unit == "KB" || unit == "kB") return 1e3;
  if (unit == "MB") return 1e6;
  if (unit == "GB") return 1e9;
  return 0;
}

int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  // Howard Hinnant's days_from_civil.
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

namespace {

bool Digits(std::string_view s, size_t pos, size_t n, int64_t& out) {
  if (pos + n > s.size()) return false;
  int64_t v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + (s[i] - '0');
  }
  out = v;
  return true;
}

/// Parses "HH:MM:SS[.fff...]" at the start of `s`; returns ns and sets `used`.
std::optional<TimeNs> TimeAt(std::string_view s, size_t& used) {
  int64_t h = 0, m = 0, sec = 0;
  if (!Digits(s, 0, 2, h) || s.size() < 8 || s[2] != ':' || !Digits(s, 3, 2, m) || s[5] != ':' || !Digits(s, 6, 2, sec))
    return std::nullopt;
  if (h > 23 || m > 59 || sec > 60) return std::nullopt;
  TimeNs ns = ((h * 60 + m) * 60 + sec) * kNsPerS;
  size_t i = 8;
  if (i < s.size() && (s[i] == '.' || s[i] == ',')) {
    ++i;
    TimeNs frac = 0, scale = kNsPerS;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (scale > 1) {
        scale /= 10;
        frac += (s[i] - '0') * scale;
      }
      ++i;
    }
    ns += frac;
  }
  used = i;
  return ns;
}

/// "Z", "+HH:MM", "+HHMM", "-HH" → offset ns to subtract; nullopt if malformed.
std::optional<TimeNs> ZoneOffset(std::string_view z) {
  z = TrimAsciiSpace(z);
  if (z.empty() || z == "Z" || z == "UTC") return TimeNs{0};
  if (z[0] != '+' && z[0] != '-') return std::nullopt;
  const int sign = z[0] == '-' ? -1 : 1;
  int64_t h = 0, m = 0;
  if (!Digits(z, 1, 2, h)) return std::nullopt;
  size_t i = 3;
  if (i < z.size() && z[i] == ':') ++i;
  if (i < z.size() && !Digits(z, i, 2, m)) return std::nullopt;
  return sign * (h * 3600 + m * 60) * kNsPerS;
}

int MonthFromName(std::string_view name) {
  static constexpr std::string_view kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (int i = 0; i < 12; ++i)
    if (name == kMonths[i]) return i + 1;
  return 0;
}

}  // namespace

std::optional<TimeNs> ParseTimeOfDay(std::string_view text) {
  text = TrimAsciiSpace(text);
  size_t used = 0;
  auto t = TimeAt(text, used);
  if (!t || used != text.size()) return std::nullopt;
  return t;
}

std::optional<TimeNs> ParseTimestamp(std::string_view text) {
  text = TrimAsciiSpace(text);
  if (text.size() < 8) return std::nullopt;
  int64_t y = 0, mo = 0, d = 0;
  size_t rest = 0;
  if (Digits(text, 0, 4, y) && text.size() >= 10 && (text[4] == '/' || text[4] == '-') && text[7] == text[4] &&
      Digits(text, 5, 2, mo) && Digits(text, 8, 2, d)) {
    rest = 10;  // 2026/07/14 or 2026-07-14
  } else if (text.size() >= 10 && (text[2] == '-' || text[2] == '/') && text[5] == text[2] && Digits(text, 0, 2, mo) &&
             Digits(text, 3, 2, d) && Digits(text, 6, 4, y)) {
    // 07-14-2026 or 07/14/2026 (`date +%m-%d-%Y`, US locales); a first field over 12
    // can only be a day (14-07-2026). Where both fit, month first.
    if (mo > 12) std::swap(mo, d);
    rest = 10;
  } else if (Digits(text, 0, 8, y) && (text.size() == 8 || text[8] == ' ' || text[8] == 'T')) {
    mo = (y / 100) % 100;  // 20260714
    d = y % 100;
    y /= 10000;
    rest = 8;
  } else if (text.size() >= 24 && text[3] == ' ' && text[7] == ' ') {
    // "Tue Jul 14 08:12:38 2026" (asctime; the day may be space-padded)
    const int month = MonthFromName(text.substr(4, 3));
    size_t i = 8;
    while (i < text.size() && text[i] == ' ') ++i;
    int64_t day = 0;
    size_t j = i;
    while (j < text.size() && j - i < 2 && text[j] >= '0' && text[j] <= '9') day = day * 10 + (text[j++] - '0');
    if (month == 0 || j == i || j >= text.size() || text[j] != ' ') return std::nullopt;
    size_t used = 0;
    auto tod = TimeAt(text.substr(j + 1), used);
    if (!tod) return std::nullopt;
    int64_t year = 0;
    const std::string_view year_text = TrimAsciiSpace(text.substr(j + 1 + used));
    if (year_text.size() != 4 || !Digits(year_text, 0, 4, year)) return std::nullopt;
    // int64 nanoseconds reach 2262: years outside 1970-2200 are corrupt, not dates.
    if (day < 1 || day > 31 || year < 1970 || year > 2200) return std::nullopt;
    return DaysFromCivil(year, static_cast<unsigned>(month), static_cast<unsigned>(day)) * 86400 * kNsPerS + *tod;
  } else {
    // Epoch seconds, as shell loggers write with `date +%s.%N`.
    auto v = ParseNumber(text);
    if (!v || *v < 1e9 || *v > 1e11) return std::nullopt;
    return static_cast<TimeNs>(std::llround(*v * 1e9));
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || y < 1970 || y > 2200) return std::nullopt;
  const TimeNs day_ns = DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 * kNsPerS;
  if (rest == text.size()) return day_ns;
  if (text[rest] != ' ' && text[rest] != 'T') return std::nullopt;
  size_t used = 0;
  std::string_view after = text.substr(rest + 1);
  while (!after.empty() && after.front() == ' ') after.remove_prefix(1);
  auto tod = TimeAt(after, used);
  if (!tod) return std::nullopt;
  auto offset = ZoneOffset(after.substr(used));
  if (!offset) return std::nullopt;
  return day_ns + *tod - *offset;
}

void SplitTrimmed(std::string_view line, char sep, std::vector<std::string_view>& out) {
  out.clear();
  size_t start = 0;
  while (true) {
    const size_t pos = line.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(TrimAsciiSpace(line.substr(start)));
      return;
    }
    out.push_back(TrimAsciiSpace(line.substr(start, pos - start)));
    start = pos + 1;
  }
}

void SplitWhitespace(std::string_view line, std::vector<std::string_view>& out) {
  out.clear();
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size()) break;
    size_t j = i;
    while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
    out.push_back(line.substr(i, j - i));
    i = j;
  }
}

}  // namespace gputriage::metric_text
