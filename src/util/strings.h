// Small ASCII string helpers shared by the importers and the kernel taxonomy.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace gputriage {

inline bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

inline bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

inline bool Contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

inline char AsciiLower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

inline std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = AsciiLower(c);
  return out;
}

/// Case-insensitive equality with a lower-case literal, without allocating.
inline bool EqualsLowered(std::string_view s, std::string_view lower) {
  if (s.size() != lower.size()) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if (AsciiLower(s[i]) != lower[i]) return false;
  return true;
}

inline bool IsAsciiAlnum(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/// `fragment` occurs in `text` as a whole token: "L4" matches "NVIDIA L4" but not
/// "NVIDIA L40S"; "A10" does not match "A100" (device names in spec and price tables).
inline bool ContainsToken(std::string_view text, std::string_view fragment) {
  if (fragment.empty()) return false;
  for (size_t at = text.find(fragment); at != std::string_view::npos; at = text.find(fragment, at + 1)) {
    const size_t end = at + fragment.size();
    const bool left = at == 0 || !IsAsciiAlnum(text[at - 1]);
    const bool right = end == text.size() || !IsAsciiAlnum(text[end]) || !IsAsciiAlnum(fragment.back());
    if (left && right) return true;
  }
  return false;
}

/// The length in bytes of a bidirectional control at `i` (UTF-8), or 0.
inline int BidiControlAt(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
  if (at(i) == 0xd8 && at(i + 1) == 0x9c) return 2;  // U+061C ARABIC LETTER MARK
  if (at(i) != 0xe2) return 0;
  const unsigned b1 = at(i + 1), b2 = at(i + 2);
  if (b1 == 0x80 && ((b2 >= 0x8e && b2 <= 0x8f) || (b2 >= 0xaa && b2 <= 0xae))) return 3;  // U+200E/F, U+202A-202E
  if (b1 == 0x81 && b2 >= 0xa6 && b2 <= 0xa9) return 3;                                    // U+2066-2069
  return 0;
}

/// The code point of the `length`-byte UTF-8 sequence at `i`.
inline unsigned BidiCode(std::string_view s, size_t i, int length) {
  const auto at = [&](size_t k) { return static_cast<unsigned>(static_cast<unsigned char>(s[k])); };
  if (length == 2) return ((at(i) & 0x1fu) << 6) | (at(i + 1) & 0x3fu);
  return ((at(i) & 0x0fu) << 12) | ((at(i + 1) & 0x3fu) << 6) | (at(i + 2) & 0x3fu);
}

/// The length of the valid UTF-8 sequence at `i` (1 for ASCII), or 0 where the
/// bytes there are not one: a stray continuation byte, a sequence cut short,
/// an overlong form, a surrogate (U+D800-DFFF) or a code point past U+10FFFF,
/// all of which Go's utf8.ValidString (Prometheus, promtool) rejects too.
inline size_t Utf8SequenceAt(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
  const unsigned c = at(i);
  if (c < 0x80) return i < s.size() ? 1 : 0;
  const auto tail = [&](size_t k) { return (at(k) & 0xc0u) == 0x80u; };
  if (c >= 0xc2 && c <= 0xdf) return tail(i + 1) ? 2 : 0;
  if (c >= 0xe0 && c <= 0xef) {
    const unsigned b1 = at(i + 1);
    const bool first_ok = c == 0xe0 ? b1 >= 0xa0 && b1 <= 0xbf : c == 0xed ? b1 >= 0x80 && b1 <= 0x9f : tail(i + 1);
    return first_ok && tail(i + 2) ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4) {
    const unsigned b1 = at(i + 1);
    const bool first_ok = c == 0xf0 ? b1 >= 0x90 && b1 <= 0xbf : c == 0xf4 ? b1 >= 0x80 && b1 <= 0x8f : tail(i + 1);
    return first_ok && tail(i + 2) && tail(i + 3) ? 4 : 0;
  }
  return 0;
}

/// `s` with every byte that is not part of a valid UTF-8 sequence replaced by
/// U+FFFD, as Go's strings.ToValidUTF8 does per byte: text another program
/// must parse as UTF-8 (a Prometheus label value, JSON) never carries raw bytes.
inline std::string ValidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8SequenceAt(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

/// Text safe to print on a terminal: control characters (ESC, newline, C1 controls
/// in UTF-8) become visible escapes (\x1b, \n, \u009b), so a name, tag, command or
/// file name cannot move the cursor, recolour the screen or break a table row;
/// Unicode's bidirectional controls (U+202A-202E, U+2066-2069, U+200E/F, U+061C)
/// too, so a name cannot show its characters in another order than they are.
/// `keep_newlines`: for a whole report, whose own lines end in newlines.
inline std::string Printable(std::string_view s, bool keep_newlines = false) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n') out += keep_newlines ? "\n" : "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
    else if (c == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
             static_cast<unsigned char>(s[i + 1]) <= 0x9f) {
      const auto d = static_cast<unsigned char>(s[++i]);
      out += {'\\', 'u', '0', '0', kHex[d >> 4], kHex[d & 15]};
    } else if (const int bidi = BidiControlAt(s, i); bidi > 0) {
      const unsigned code = BidiCode(s, i, bidi);
      out += {'\\', 'u', kHex[(code >> 12) & 15], kHex[(code >> 8) & 15], kHex[(code >> 4) & 15], kHex[code & 15]};
      i += static_cast<size_t>(bidi) - 1;
    } else if (c >= 0x80) {
      // A whole UTF-8 sequence is kept; a byte that does not start one (a
      // server's binary garbage) is escaped, so every message stays valid text.
      const size_t length = Utf8SequenceAt(s, i);
      if (length > 0) {
        out.append(s.substr(i, length));
        i += length - 1;
      } else {
        out += {'\\', 'x', kHex[c >> 4], kHex[c & 15]};
      }
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

/// The last component of a path ("run.json.gz" of "/logs/run.json.gz").
inline std::string FileName(std::string_view path) {
  const size_t slash = path.find_last_of('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

inline bool IsAsciiSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

inline std::string_view TrimAsciiSpace(std::string_view s) {
  while (!s.empty() && IsAsciiSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsAsciiSpace(s.back())) s.remove_suffix(1);
  return s;
}

/// The parts joined with `separator` between them ("a, b, c").
template <typename Parts>
std::string Join(const Parts& parts, std::string_view separator) {
  std::string out;
  bool first = true;
  for (const auto& part : parts) {
    if (!first) out += separator;
    out += part;
    first = false;
  }
  return out;
}

/// The non-empty parts of `text` between occurrences of `separator` (Join's inverse).
inline std::vector<std::string> Split(std::string_view text, std::string_view separator) {
  std::vector<std::string> out;
  while (!text.empty()) {
    const size_t at = text.find(separator);
    if (at != 0) out.emplace_back(text.substr(0, at));
    if (at == std::string_view::npos) break;
    text.remove_prefix(at + separator.size());
  }
  return out;
}

}  // namespace gputriage
