#include "src/util/text_encoding.h"

#include <cstdlib>
#include <cstring>

#include "src/util/strings.h"

namespace gputriage {
namespace {

/// The code point of the valid UTF-8 sequence of `length` bytes at `i`.
unsigned CodePoint(std::string_view s, size_t i, size_t length) {
  const auto b = [&](size_t k) { return static_cast<unsigned>(static_cast<unsigned char>(s[i + k])); };
  if (length == 1) return b(0);
  if (length == 2) return ((b(0) & 0x1fu) << 6) | (b(1) & 0x3fu);
  if (length == 3) return ((b(0) & 0x0fu) << 12) | ((b(1) & 0x3fu) << 6) | (b(2) & 0x3fu);
  return ((b(0) & 0x07u) << 18) | ((b(1) & 0x3fu) << 12) | ((b(2) & 0x3fu) << 6) | (b(3) & 0x3fu);
}

/// The ASCII spelling of a symbol gputriage prints; null for any other character.
const char* AsciiSpelling(unsigned c) {
  switch (c) {
    case 0x2192: return "->";   // →
    case 0x2190: return "<-";   // ←
    case 0x00B5: return "u";    // µ (micro)
    case 0x03BC: return "u";    // μ
    case 0x2212: return "-";    // − (minus)
    case 0x2013: return "-";    // –
    case 0x2014: return "-";    // —
    case 0x2011: return "-";    // non-breaking hyphen
    case 0x00D7: return "x";    // ×
    case 0x00B7: return "*";    // ·
    case 0x00B1: return "+/-";  // ±
    case 0x2265: return ">=";   // ≥
    case 0x2264: return "<=";   // ≤
    case 0x2248: return "~";    // ≈
    case 0x2261: return "==";   // ≡
    case 0x2026: return "...";  // …
    case 0x00A7: return "S";    // §
    case 0x221A: return "sqrt";  // √
    case 0x00B0: return " deg";  // °
    case 0x2018: case 0x2019: return "'";
    case 0x201C: case 0x201D: return "\"";
    case 0x00A0: return " ";
    case 0xFFFD: return "?";
    default: return nullptr;
  }
}

/// The codeset part of a locale name ("en_US.UTF-8@euro" → "UTF-8"), lower case, without '-' or '_'.
std::string Codeset(const char* locale) {
  std::string_view name(locale);
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos) return "";
  std::string_view set = name.substr(dot + 1);
  set = set.substr(0, set.find('@'));
  std::string out;
  for (char ch : set)
    if (ch != '-' && ch != '_') out += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
  return out;
}

}  // namespace

TextEncoding LocaleTextEncoding(const char* lc_all, const char* lc_ctype, const char* lang) {
  const char* locale = nullptr;
  for (const char* v : {lc_all, lc_ctype, lang})
    if (v != nullptr && *v != '\0') {
      locale = v;
      break;
    }
  if (locale == nullptr) return TextEncoding::kUtf8;
  const std::string set = Codeset(locale);
  if (set == "utf8") return TextEncoding::kUtf8;
  if (set == "iso88591" || set == "iso885915" || set == "latin1") return TextEncoding::kLatin1;
  return TextEncoding::kAscii;  // "C", "POSIX", "en_US" with no codeset, ANSI_X3.4-1968, another codeset
}

TextEncoding TerminalTextEncoding() {
  static const TextEncoding encoding =
      LocaleTextEncoding(std::getenv("LC_ALL"), std::getenv("LC_CTYPE"), std::getenv("LANG"));
  return encoding;
}

std::string ForTextEncoding(std::string_view utf8, TextEncoding encoding) {
  if (encoding == TextEncoding::kUtf8) return std::string(utf8);
  std::string out;
  out.reserve(utf8.size());
  for (size_t i = 0; i < utf8.size();) {
    const size_t length = Utf8SequenceAt(utf8, i);
    if (length == 0) {  // not UTF-8 at all: never passed through as a raw byte
      out += '?';
      ++i;
      continue;
    }
    const unsigned c = CodePoint(utf8, i, length);
    i += length;
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (const char* ascii = AsciiSpelling(c); ascii != nullptr && !(encoding == TextEncoding::kLatin1 && c <= 0xFF)) {
      out += ascii;
    } else if (encoding == TextEncoding::kLatin1 && c >= 0xA0 && c <= 0xFF) {
      out += static_cast<char>(c);
    } else {
      out += '?';
    }
  }
  return out;
}

}  // namespace gputriage
