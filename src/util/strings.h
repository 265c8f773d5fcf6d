// Small ASCII string helpers shared by the importers and the kernel taxonomy.
#pragma once

#include <string>
#include <string_view>

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

inline bool IsAsciiSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

inline std::string_view TrimAsciiSpace(std::string_view s) {
  while (!s.empty() && IsAsciiSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsAsciiSpace(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace gputriage
