// gzip for replies (zlib, used only in gzip.cc): the agent's /metrics page
// compresses about 8:1, which matters to a Prometheus scraping thousands of
// agents.
#pragma once

#include <string>
#include <string_view>

namespace gputriage {

/// `data` as a gzip member (RFC 1952) at zlib's default level.
std::string GzipCompress(std::string_view data);

}  // namespace gputriage
