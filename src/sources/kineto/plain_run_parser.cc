#include "src/sources/kineto/plain_run_parser.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "src/util/decimal.h"

namespace gputriage::kineto {
namespace {

// The run's bracket check (EventRunIsWellFormed) allows the same depth: an
// element's own braces are level 1.
constexpr int kMaxDepth = 64;

inline bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }
inline bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

/// The value of 8 ASCII digits at p, the first most significant (SWAR: three
/// multiplies instead of eight dependent steps); the caller knows they are digits.
inline uint64_t EightDigits(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  v -= 0x3030303030303030ULL;
  v = (v * 10) + (v >> 8);
  v = (((v & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32))) +
       (((v >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >>
      32;
  return static_cast<uint32_t>(v);
}

/// The value of n ≤ 19 ASCII digits (the caller knows they are digits).
inline uint64_t Digits(const char* p, size_t n) {
  uint64_t value = 0;
  for (; n >= 8; p += 8, n -= 8) value = value * 100000000 + EightDigits(p);
  for (; n > 0; ++p, --n) value = value * 10 + static_cast<uint64_t>(*p - '0');
  return value;
}

/// What a number token looks like, for the fields that read numbers: only forms
/// whose value every correct reader agrees on are read here.
struct NumberToken {
  std::string_view text;
  bool negative = false;
  bool fraction = false;
  bool exponent = false;
  const char* whole = nullptr;  // the digits before the point
  int whole_digits = 0;
  const char* fraction_begin = nullptr;  // the digits after it
  int fraction_digits = 0;
  int digits() const { return whole_digits + fraction_digits; }
  /// The integer's value (no fraction or exponent, at most 18 digits).
  int64_t IntegerValue() const {
    const auto value = static_cast<int64_t>(Digits(whole, static_cast<size_t>(whole_digits)));
    return negative ? -value : value;
  }
};

/// The value types EventParser tells apart (simdjson's json_type).
enum class ValueKind { kObject, kArray, kString, kNumber, kLiteral };

class PlainRunReader {
 public:
  PlainRunReader(std::string_view elements,
                 const std::function<void(const RawEvent&, size_t position)>& on_event)
      : begin_(elements.data()), p_(elements.data()), end_(elements.data() + elements.size()), on_event_(on_event) {}

  bool ReadAll() {
    if (p_ >= end_ || *p_ != '{') return false;
    while (true) {
      const char* element = p_;
      event_ = RawEvent{};
      if (!ReadEvent()) return false;
      on_event_(event_, static_cast<size_t>(element - begin_));
      SkipSpace();
      if (p_ == end_) return true;
      if (*p_ != ',') return false;
      ++p_;
      SkipSpace();
      if (p_ >= end_ || *p_ != '{') return false;
    }
  }

 private:
  void SkipSpace() {
    while (p_ < end_ && IsSpace(*p_)) ++p_;
  }

  bool Consume(char c) {
    if (p_ >= end_ || *p_ != c) return false;
    ++p_;
    return true;
  }

  // Asked of every value: inline, or it is a call per value.
  [[gnu::always_inline]] std::optional<ValueKind> Kind() const {
    if (p_ >= end_) return std::nullopt;
    switch (*p_) {
      case '{': return ValueKind::kObject;
      case '[': return ValueKind::kArray;
      case '"': return ValueKind::kString;
      case 't': case 'f': case 'n': return ValueKind::kLiteral;
      default: return (*p_ == '-' || IsDigit(*p_)) ? std::optional(ValueKind::kNumber) : std::nullopt;
    }
  }

  /// A string from its opening quote. With `escapes_allowed` (strings no field
  /// reads) valid escapes are passed over; in a string that is read, an escape
  /// gives up (simdjson would unescape it). Control characters and non-ASCII bytes
  /// give up everywhere: simdjson's own checks decide those.
  bool ReadString(std::string_view* out, bool escapes_allowed) {
    const char* p = ++p_;
    while (true) {
#if defined(__SSE2__)
      // 16 bytes at a time (the padding makes reading past the end safe): quotes,
      // backslashes, and bytes below 0x20 or above 0x7f (negative as signed chars).
      const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
      while (p < end_) {
        const __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        const __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(chunk, quote), _mm_cmpeq_epi8(chunk, backslash)),
                                             _mm_cmplt_epi8(chunk, space));
        const unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(special));
        if (mask != 0) {
          p += __builtin_ctz(mask);
          break;
        }
        p += 16;
      }
#else
      while (p < end_ && *p != '"' && *p != '\\' && static_cast<unsigned char>(*p) >= 0x20 &&
             static_cast<unsigned char>(*p) < 0x80)
        ++p;
#endif
      if (p >= end_) return false;
      if (*p == '"') {
        *out = std::string_view(p_, static_cast<size_t>(p - p_));
        p_ = p + 1;
        return true;
      }
      if (*p != '\\' || !escapes_allowed || p + 1 >= end_) return false;
      const char e = p[1];
      if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
        p += 2;
      } else if (e == 'u' && end_ - p >= 6 && IsHex(p[2]) && IsHex(p[3]) && IsHex(p[4]) && IsHex(p[5])) {
        p += 6;
      } else {
        return false;
      }
    }
  }

  /// A JSON number (the grammar, strictly: no leading zeros, digits after a point
  /// and in an exponent).
  bool ReadNumber(NumberToken* out) {
    const char* const start = p_;
    const char* p = p_;
    out->negative = p < end_ && *p == '-';
    if (out->negative) ++p;
    if (p >= end_ || !IsDigit(*p)) return false;
    out->whole = p;
    if (*p == '0') {
      ++p;
    } else {
      while (p < end_ && IsDigit(*p)) ++p;
    }
    out->whole_digits = static_cast<int>(p - out->whole);
    if (p < end_ && *p == '.') {
      ++p;
      out->fraction = true;
      out->fraction_begin = p;
      if (p >= end_ || !IsDigit(*p)) return false;
      while (p < end_ && IsDigit(*p)) ++p;
      out->fraction_digits = static_cast<int>(p - out->fraction_begin);
    }
    if (p < end_ && (*p == 'e' || *p == 'E')) {
      ++p;
      out->exponent = true;
      if (p < end_ && (*p == '+' || *p == '-')) ++p;
      if (p >= end_ || !IsDigit(*p)) return false;
      while (p < end_ && IsDigit(*p)) ++p;
    }
    out->text = std::string_view(start, static_cast<size_t>(p - start));
    p_ = p;
    return true;
  }

  bool ReadLiteral() {
    for (std::string_view word : {std::string_view("true"), std::string_view("false"), std::string_view("null")}) {
      if (static_cast<size_t>(end_ - p_) >= word.size() && std::memcmp(p_, word.data(), word.size()) == 0) {
        p_ += word.size();
        return true;
      }
    }
    return false;
  }

  /// Any valid value, read for its validity only. `depth`: the level of its container.
  bool SkipValue(int depth) {
    const auto kind = Kind();
    if (!kind) return false;
    switch (*kind) {
      case ValueKind::kString: {
        std::string_view ignored;
        return ReadString(&ignored, true);
      }
      case ValueKind::kNumber: {
        NumberToken ignored;
        return ReadNumber(&ignored);
      }
      case ValueKind::kLiteral: return ReadLiteral();
      case ValueKind::kObject:
      case ValueKind::kArray: return SkipContainer(depth + 1);
    }
    return false;
  }

  /// Walks the object or array whose opening bracket p_ is at (`depth`: its own
  /// level), calling `element(key)` with p_ at each value (key empty in an array);
  /// the callback reads or skips the value. Object keys are read as written: with
  /// `escaped_keys` false, a key with an escape gives up (simdjson unescapes it).
  template <typename Element>
  bool ReadContainer(int depth, bool escaped_keys, Element&& element) {
    if (depth > kMaxDepth || p_ >= end_) return false;
    const char close = *p_ == '{' ? '}' : ']';
    ++p_;
    SkipSpace();
    if (Consume(close)) return true;
    while (true) {
      std::string_view key;
      if (close == '}') {
        if (p_ >= end_ || *p_ != '"' || !ReadString(&key, escaped_keys)) return false;
        SkipSpace();
        if (!Consume(':')) return false;
        SkipSpace();
      }
      if (!element(key)) return false;
      SkipSpace();
      if (Consume(close)) return true;
      if (!Consume(',')) return false;
      SkipSpace();
    }
  }

  /// An object or array from its opening bracket, for its validity only.
  bool SkipContainer(int depth) {
    return ReadContainer(depth, true, [&](std::string_view) { return SkipValue(depth); });
  }

  /// An object's members: `member(key)` with p_ at each value. `depth`: its level.
  template <typename Member>
  bool ReadObject(int depth, Member&& member) {
    return Kind() == ValueKind::kObject && ReadContainer(depth, false, std::forward<Member>(member));
  }

  // ---- The readings of EventParser (kineto_json.cc), value by value. ----

  /// A number field: `from_number` reads a number token (false: give up), a string
  /// is read as text by `from_string`, and any other value leaves nothing.
  template <typename T, typename FromNumber, typename FromString>
  bool ReadNumeric(std::optional<T>* out, int depth, FromNumber&& from_number, FromString&& from_string) {
    const auto kind = Kind();
    if (kind == ValueKind::kNumber) {
      NumberToken number;
      return ReadNumber(&number) && from_number(number, out);
    }
    if (kind == ValueKind::kString) {
      std::string_view text;
      if (!ReadString(&text, false)) return false;
      *out = from_string(text);
      return true;
    }
    *out = std::nullopt;
    return SkipValue(depth);
  }

  /// AsInt: an integer of up to 18 digits (what simdjson's get_int64 reads
  /// exactly), the number at the end of a string, nothing for other types.
  /// Fractions, exponents and longer integers give up.
  bool ReadInt(std::optional<int64_t>* out, int depth) {
    return ReadNumeric(
        out, depth,
        [](const NumberToken& number, std::optional<int64_t>* value) {
          if (number.fraction || number.exponent || number.digits() > 18) return false;
          *value = number.IntegerValue();
          return true;
        },
        [](std::string_view text) { return ParseTrailingInt(text); });
  }

  /// AsDouble: numbers of up to 15 significant digits without exponent, whose
  /// double every correctly rounding reader agrees on (mantissa and power of ten
  /// both exact, one rounding); strings through the same strtod as EventParser.
  bool ReadDouble(std::optional<double>* out, int depth) {
    return ReadNumeric(
        out, depth,
        [](const NumberToken& number, std::optional<double>* value) {
          if (number.exponent || number.digits() > 15) return false;
          static constexpr double kPowersOfTen[] = {1e0, 1e1, 1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                                    1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
          const uint64_t mantissa = Digits(number.whole, static_cast<size_t>(number.whole_digits)) *
                                        static_cast<uint64_t>(kPowersOfTen[number.fraction_digits]) +
                                    Digits(number.fraction_begin, static_cast<size_t>(number.fraction_digits));
          const double d = static_cast<double>(mantissa) / kPowersOfTen[number.fraction_digits];
          *value = number.negative ? -d : d;
          return true;
        },
        [](std::string_view text) { return DoubleFromText(text); });
  }

  /// AsTimeNs: the number's text, or a string's, as microseconds; anything else,
  /// or text that does not read, marks the field malformed.
  bool ReadTime(std::optional<int64_t>* out, bool* malformed, int depth) {
    const auto kind = Kind();
    std::optional<int64_t> ns;
    if (kind == ValueKind::kNumber) {
      NumberToken number;
      if (!ReadNumber(&number)) return false;
      ns = MicrosecondsToNs(number);
    } else if (kind == ValueKind::kString) {
      std::string_view text;
      if (!ReadString(&text, false)) return false;
      ns = ParseMicrosecondsToNs(text);
    } else if (!SkipValue(depth)) {
      return false;
    }
    if (!ns) *malformed = true;
    *out = ns;
    return true;
  }

  /// ParseMicrosecondsToNs of the token's text, from its digits as read: what
  /// Kineto writes (a non-negative number of at most 16 whole digits and 3
  /// decimals, no exponent) directly, anything else through the general reader.
  static std::optional<int64_t> MicrosecondsToNs(const NumberToken& number) {
    if (!number.negative && !number.exponent && number.whole_digits <= 16 && number.fraction_digits <= 3)
      if (auto ns = KinetoMicrosecondsToNs(Digits(number.whole, static_cast<size_t>(number.whole_digits)),
                                           Digits(number.fraction_begin, static_cast<size_t>(number.fraction_digits)),
                                           number.fraction_digits))
        return ns;
    return ParseMicrosecondsToNs(number.text);
  }

  /// A string field kept only when the value is a string.
  bool ReadStringIfString(std::string_view* out, int depth) {
    if (Kind() == ValueKind::kString) return ReadString(out, false);
    return SkipValue(depth);
  }

  /// ReadDim3: an array of integers; any other element gives up.
  bool ReadDim3(bool* has, uint32_t dim[3], int depth) {
    if (Kind() != ValueKind::kArray) {
      *has = false;
      return SkipValue(depth);
    }
    int i = 0;
    *has = ReadContainer(depth + 1, true, [&](std::string_view) {
      NumberToken number;
      if (Kind() != ValueKind::kNumber || !ReadNumber(&number) || number.fraction || number.exponent ||
          number.digits() > 18)
        return false;
      const int64_t x = number.IntegerValue();
      if (i < 3) dim[i] = x < 0 ? 0 : static_cast<uint32_t>(std::min<int64_t>(x, UINT32_MAX));
      ++i;
      return true;
    });
    return *has;
  }

  /// FirstNonEmptyString: the first non-empty string element of an array.
  bool ReadFirstNonEmptyString(std::string_view* out, int depth) {
    *out = {};
    if (Kind() != ValueKind::kArray) return SkipValue(depth);
    bool found = false;
    return ReadContainer(depth + 1, true, [&](std::string_view) {
      if (found || Kind() != ValueKind::kString) return SkipValue(depth + 1);
      std::string_view s;
      if (!ReadString(&s, false)) return false;
      if (!s.empty()) *out = s, found = true;
      return true;
    });
  }

  /// "Input Dims": the array's text up to the next token, as simdjson's raw_json()
  /// gives it; another type leaves the field as it was.
  bool ReadRawArray(std::string_view* out, int depth) {
    if (Kind() != ValueKind::kArray) return SkipValue(depth);
    const char* start = p_;
    if (!SkipValue(depth)) return false;
    SkipSpace();
    *out = std::string_view(start, static_cast<size_t>(p_ - start));
    return true;
  }

  /// ParseArgs: each member as ArgTargetOf says.
  bool ReadArgs(int depth) {
    return ReadObject(depth, [&](std::string_view key) -> bool {
      const ArgTarget target = ArgTargetOf(key, event_);
      switch (target.kind) {
        case ArgTarget::Kind::kInt: return ReadInt(target.int_value, depth);
        case ArgTarget::Kind::kDouble: return ReadDouble(target.double_value, depth);
        case ArgTarget::Kind::kDim3: return ReadDim3(target.has_dim3, target.dim3, depth);
        case ArgTarget::Kind::kString: return ReadStringIfString(target.text, depth);
        case ArgTarget::Kind::kFirstNonEmptyString: return ReadFirstNonEmptyString(target.text, depth);
        case ArgTarget::Kind::kRawArray: return ReadRawArray(target.text, depth);
        case ArgTarget::Kind::kUnused: break;
      }
      return SkipValue(depth);
    });
  }

  /// ParseEventObject: an element (level 1).
  bool ReadEvent() {
    RawEvent& e = event_;
    constexpr int depth = 1;
    return ReadObject(depth, [&](std::string_view key) -> bool {
      if (KeyIs(key, "ph")) {
        std::string_view ph;
        // Not a one-letter string: EventParser fails the event, and the run with it.
        if (Kind() != ValueKind::kString || !ReadString(&ph, false) || ph.size() != 1) return false;
        e.ph = ph[0];
        return true;
      }
      if (KeyIs(key, "cat")) return Kind() == ValueKind::kString && ReadString(&e.cat, false);
      if (KeyIs(key, "name")) return ReadStringIfString(&e.name, depth);
      if (KeyIs(key, "ts")) return ReadTime(&e.ts_ns, &e.ts_malformed, depth);
      if (KeyIs(key, "dur")) return ReadTime(&e.dur_ns, &e.dur_malformed, depth);
      if (KeyIs(key, "pid")) {
        const bool is_string = Kind() == ValueKind::kString;
        const char* value = p_;
        if (!ReadInt(&e.pid, depth)) return false;
        // Only a pid without a number can be the autograd profiler's "CPU functions".
        if (!e.pid && is_string)
          e.pid_cpu_functions = std::string_view(value, static_cast<size_t>(p_ - value)) == "\"CPU functions\"";
        return true;
      }
      if (KeyIs(key, "tid")) return ReadInt(&e.tid, depth);
      if (KeyIs(key, "args")) {
        if (Kind() == ValueKind::kObject) return ReadArgs(depth + 1);
        return SkipValue(depth);
      }
      return SkipValue(depth);
    });
  }

  const char* const begin_;
  const char* p_;
  const char* const end_;
  const std::function<void(const RawEvent&, size_t position)>& on_event_;
  RawEvent event_;
};

}  // namespace

bool ParsePlainRun(std::string_view elements, const std::function<void(const RawEvent&, size_t position)>& on_event) {
  return PlainRunReader(elements, on_event).ReadAll();
}

}  // namespace gputriage::kineto
