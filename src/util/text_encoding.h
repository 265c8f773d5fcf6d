// Human-readable text (reports, errors) in the terminal's encoding. gputriage
// writes UTF-8 (→, ×, µ, ...); a terminal under a locale that says another
// encoding (LANG=C, ISO-8859-1) shows those bytes as garbage. JSON, HTML and
// files stay UTF-8 whatever the locale: they are formats, read by programs.
#pragma once

#include <string>
#include <string_view>

namespace gputriage {

enum class TextEncoding { kUtf8, kLatin1, kAscii };

/// The encoding a locale names, from the variables in their order of
/// precedence (LC_ALL, then LC_CTYPE, then LANG; null or empty: unset). Every
/// one unset is taken as UTF-8, as today's terminals and container images are
/// (and as Python's C-locale coercion does); an explicit "C" or "POSIX", or a
/// codeset other than UTF-8, is not: ISO-8859-1 (and -15) keep Latin-1's
/// characters, anything else is ASCII.
TextEncoding LocaleTextEncoding(const char* lc_all, const char* lc_ctype, const char* lang);

/// This process's: from its environment, read once.
TextEncoding TerminalTextEncoding();

/// `utf8` for a terminal of that encoding: the symbols gputriage prints
/// spelled in ASCII ("->", "x", "u", "+/-", ">=", "..."), Latin-1's own
/// characters kept as single bytes where the terminal is Latin-1, and any other
/// character (a kernel's or a job's name in another script) as '?'.
std::string ForTextEncoding(std::string_view utf8, TextEncoding encoding);

}  // namespace gputriage
