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

/// Text safe to print on a terminal: control characters (ESC, newline, C1 controls
/// in UTF-8) become visible escapes (\x1b, \n, \u009b), so a name, tag, command or
/// file name cannot move the cursor, recolour the screen or break a table row.
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
