// libFuzzer target: the request-head parser every byte a client sends to the
// agent or `serve` goes through first (src/net/http_request.cc). Beyond not
// crashing, what it promises: a complete head never claims more bytes than it
// was given nor more than the limit, never more headers than the limit, and
// its path and header values carry no CR, LF or NUL.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "src/net/http_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  gputriage::HttpHeadLimits limits;
  limits.max_head_bytes = 2048;
  limits.max_header_count = 16;
  gputriage::HttpRequest request;
  size_t used = 0;
  std::string why;
  const auto result = gputriage::ParseRequestHead(text, limits, &request, &used, &why);
  if (result == gputriage::HeadParse::kComplete) {
    const size_t lead = text.find_first_not_of("\r\n");  // blank lines before the head
    if (used == 0 || used > size || lead == std::string_view::npos || used - lead > limits.max_head_bytes) __builtin_trap();
    if (request.headers.size() > limits.max_header_count) __builtin_trap();
    for (const auto& [name, value] : request.headers)
      if (name.empty() || value.find_first_of(std::string_view("\r\n\0", 3)) != std::string::npos) __builtin_trap();
    if (request.method.empty() || request.target.empty()) __builtin_trap();
  } else if (result != gputriage::HeadParse::kIncomplete && why.empty()) {
    __builtin_trap();  // every refusal says why
  }
  (void)gputriage::AcceptWeight(text, "gzip", "*");
  return 0;
}
