#include "src/net/http_request.h"

#include <algorithm>
#include <cstdlib>

namespace gputriage {
namespace {

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (Lower(a[i]) != Lower(b[i])) return false;
  return true;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/// RFC 9110 token characters (methods and header names).
bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar); }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// The next line of the head without its CR LF (or bare LF); false at the end.
bool NextLine(std::string_view head, size_t* pos, std::string_view* line) {
  if (*pos >= head.size()) return false;
  size_t end = head.find('\n', *pos);
  if (end == std::string_view::npos) end = head.size();
  std::string_view l = head.substr(*pos, end - *pos);
  if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
  *line = l;
  *pos = end + 1;
  return true;
}

/// Each comma-separated element of a header value, trimmed, empty ones skipped.
template <typename F>
void ForEachListElement(std::string_view value, F&& f) {
  size_t pos = 0;
  while (pos <= value.size()) {
    size_t comma = value.find(',', pos);
    if (comma == std::string_view::npos) comma = value.size();
    const std::string_view element = Trim(value.substr(pos, comma - pos));
    if (!element.empty()) f(element);
    pos = comma + 1;
  }
}

}  // namespace

std::string HttpRequest::Header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (EqualsIgnoreCase(n, name)) return v;
  return {};
}

bool HttpRequest::HasHeader(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(), [&](const auto& h) { return EqualsIgnoreCase(h.first, name); });
}

HttpResponse HttpResponse::Text(int status, std::string text, std::string content_type) {
  HttpResponse r;
  r.status = status;
  r.content_type = std::move(content_type);
  r.body = std::make_shared<const std::string>(std::move(text));
  return r;
}

void HttpResponse::SetHeader(std::string name, std::string value) {
  for (auto& [n, v] : headers)
    if (EqualsIgnoreCase(n, name)) {
      v = std::move(value);
      return;
    }
  headers.emplace_back(std::move(name), std::move(value));
}

const char* HttpReason(int status) {
  switch (status) {
    case 200: return "OK";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 303: return "See Other";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return status < 300 ? "OK" : status < 400 ? "Redirect" : status < 500 ? "Client Error" : "Server Error";
  }
}

std::string PercentDecode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%' && i + 2 < text.size() && HexValue(text[i + 1]) >= 0 && HexValue(text[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(text[i + 1]) * 16 + HexValue(text[i + 2]));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out += ' ';
    } else {
      out += c;  // a stray '%' stays as sent
    }
  }
  return out;
}

std::string PercentEncodeQuery(std::string_view text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
        c == '~') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

std::multimap<std::string, std::string> ParseQuery(std::string_view query) {
  std::multimap<std::string, std::string> out;
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string_view::npos) amp = query.size();
    const std::string_view pair = query.substr(pos, amp - pos);
    if (!pair.empty()) {
      // Split on the first '=' only: "tag=lr=0.05" is the key "tag" with the value "lr=0.05".
      const size_t eq = pair.find('=');
      if (eq == std::string_view::npos) {
        out.emplace(PercentDecode(pair, true), std::string());
      } else {
        out.emplace(PercentDecode(pair.substr(0, eq), true), PercentDecode(pair.substr(eq + 1), true));
      }
    }
    pos = amp + 1;
  }
  return out;
}

double AcceptWeight(std::string_view header, std::string_view token, std::string_view wildcard) {
  // The most specific range that matches decides (RFC 9110 12.5.1): the token
  // itself, then "type/*", then the wildcard.
  int best_rank = 0;
  double best_q = 0;
  const size_t slash = token.find('/');
  const std::string_view type_range = slash == std::string_view::npos ? std::string_view() : token.substr(0, slash + 1);
  ForEachListElement(header, [&](std::string_view element) {
    std::string_view range = element;
    double q = 1;
    const size_t semi = element.find(';');
    if (semi != std::string_view::npos) {
      range = Trim(element.substr(0, semi));
      std::string_view params = element.substr(semi + 1);
      size_t p = 0;
      while (p <= params.size()) {
        size_t next = params.find(';', p);
        if (next == std::string_view::npos) next = params.size();
        const std::string_view param = Trim(params.substr(p, next - p));
        if (param.size() > 2 && Lower(param[0]) == 'q' && param[1] == '=') {
          const std::string value(param.substr(2));
          char* end = nullptr;
          const double parsed = std::strtod(value.c_str(), &end);
          if (end != value.c_str() && *end == '\0' && parsed >= 0 && parsed <= 1) q = parsed;
        }
        p = next + 1;
      }
    }
    int rank = 0;
    if (EqualsIgnoreCase(range, token)) {
      rank = 3;
    } else if (!type_range.empty() && range.size() == type_range.size() + 1 && range.back() == '*' &&
               EqualsIgnoreCase(range.substr(0, type_range.size()), type_range)) {
      rank = 2;
    } else if (!wildcard.empty() && range == wildcard) {
      rank = 1;
    }
    if (rank > best_rank) {
      best_rank = rank;
      best_q = q;
    }
  });
  return best_q;
}

HeadParse ParseRequestHead(std::string_view buffer, const HttpHeadLimits& limits, HttpRequest* request,
                           size_t* head_bytes, std::string* why) {
  // Empty lines before a request line are skipped (RFC 9112 2.2): a client may
  // send a CR LF after a request's body.
  size_t start = 0;
  while (start < buffer.size() && (buffer[start] == '\r' || buffer[start] == '\n')) ++start;
  if (buffer.size() - start >= 3 && buffer.substr(start, 3) == "PRI") {
    if (buffer.size() - start < 14) return HeadParse::kIncomplete;
    if (buffer.substr(start, 14) == "PRI * HTTP/2.0") {
      *why = "HTTP/2 without upgrade is not served here: use HTTP/1.1";
      return HeadParse::kVersion;
    }
  }
  // The head ends at the first empty line.
  size_t end = std::string_view::npos;
  size_t lines = 0;
  for (size_t i = start; i < buffer.size(); ++i) {
    if (buffer[i] != '\n') continue;
    if (++lines > limits.max_header_count + 1) {
      *why = "more than " + std::to_string(limits.max_header_count) + " header fields";
      return HeadParse::kTooLarge;
    }
    const bool blank = (i >= 1 && buffer[i - 1] == '\n') || (i >= 2 && buffer[i - 1] == '\r' && buffer[i - 2] == '\n');
    if (blank && i > start) {
      end = i + 1;
      break;
    }
  }
  if (end == std::string_view::npos) {
    // Blank lines before the head count too: a client cannot park megabytes of
    // CR LF in front of a request.
    if (buffer.size() > limits.max_head_bytes) {
      *why = "the request line and headers are over " + std::to_string(limits.max_head_bytes) + " bytes";
      return HeadParse::kTooLarge;
    }
    return HeadParse::kIncomplete;
  }
  if (end - start > limits.max_head_bytes) {
    *why = "the request line and headers are over " + std::to_string(limits.max_head_bytes) + " bytes";
    return HeadParse::kTooLarge;
  }
  const std::string_view head = buffer.substr(start, end - start);
  size_t pos = 0;
  std::string_view line;
  NextLine(head, &pos, &line);
  // METHOD SP request-target SP HTTP/1.x
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    *why = "the request line is not METHOD TARGET HTTP/1.1";
    return HeadParse::kBad;
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) {
    *why = "the method is not a token";
    return HeadParse::kBad;
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9') {
    *why = "the request line does not end in HTTP/1.1";
    return HeadParse::kBad;
  }
  if (version[5] != '1') {
    *why = "HTTP/" + std::string(version.substr(5)) + " is not served here: use HTTP/1.1";
    return HeadParse::kVersion;
  }
  if (target.empty() || std::any_of(target.begin(), target.end(), [](char c) {
        return static_cast<unsigned char>(c) <= 0x20 || static_cast<unsigned char>(c) == 0x7f;
      })) {
    *why = "the request target is empty or has control characters";
    return HeadParse::kBad;
  }
  HttpRequest r;
  r.method = std::string(method);
  r.target = std::string(target);
  r.minor_version = version[7] - '0';
  r.keep_alive = r.minor_version >= 1;
  // origin-form "/path?query"; absolute-form "http://host/path" (proxies' form, RFC 9112 3.2.2) is taken too.
  std::string_view origin = target;
  if (origin.front() != '/' && origin != "*") {
    const size_t scheme = origin.find("://");
    if (scheme == std::string_view::npos) {
      *why = "the request target is not a path";
      return HeadParse::kBad;
    }
    const size_t path_start = origin.find('/', scheme + 3);
    origin = path_start == std::string_view::npos ? std::string_view("/") : origin.substr(path_start);
  }
  const size_t question = origin.find('?');
  r.path = PercentDecode(origin.substr(0, question), false);
  if (question != std::string_view::npos) r.query = ParseQuery(origin.substr(question + 1));

  bool has_length = false;
  while (NextLine(head, &pos, &line)) {
    if (line.empty()) break;
    if (line.front() == ' ' || line.front() == '\t') {
      *why = "a header line is folded (obsolete, RFC 9112 5.2)";
      return HeadParse::kBad;
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
      *why = "a header line is not NAME: VALUE";
      return HeadParse::kBad;
    }
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = Trim(line.substr(colon + 1));
    if (std::any_of(value.begin(), value.end(), [](char c) { return c == '\0' || c == '\r' || c == '\n'; })) {
      *why = "header " + std::string(name) + " has control characters";
      return HeadParse::kBad;
    }
    if (EqualsIgnoreCase(name, "Content-Length")) {
      if (value.empty() || value.size() > 15 || !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        *why = "Content-Length is not a number";
        return HeadParse::kBad;
      }
      const size_t length = std::strtoull(std::string(value).c_str(), nullptr, 10);
      if (has_length && length != r.content_length) {
        *why = "two different Content-Length headers";
        return HeadParse::kBad;
      }
      has_length = true;
      r.content_length = length;
    } else if (EqualsIgnoreCase(name, "Transfer-Encoding")) {
      r.chunked = true;
    } else if (EqualsIgnoreCase(name, "Host") && r.HasHeader("Host")) {
      // Which host was meant is then unknowable (RFC 9112, 3.2: respond 400).
      *why = "two Host headers";
      return HeadParse::kBad;
    } else if (EqualsIgnoreCase(name, "Connection")) {
      ForEachListElement(value, [&](std::string_view option) {
        if (EqualsIgnoreCase(option, "close")) r.keep_alive = false;
        if (EqualsIgnoreCase(option, "keep-alive") && r.minor_version == 0) r.keep_alive = true;
      });
    }
    r.headers.emplace_back(std::string(name), std::string(value));
  }
  if (r.minor_version >= 1 && !r.HasHeader("Host")) {
    *why = "an HTTP/1.1 request without a Host header";
    return HeadParse::kBad;
  }
  *request = std::move(r);
  *head_bytes = end;
  return HeadParse::kComplete;
}

}  // namespace gputriage
