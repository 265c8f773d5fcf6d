// Which connection gives way at the server's connection cap, where the choice
// needs more than the server's own bookkeeping: whether a connection's client
// has sent anything yet (the kernel's receive buffer). Kept out of the event
// loop so that a test can put real sockets in each state and check the choice.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace gputriage {

/// A connection just begun: accepted (or between keep-alive requests) and
/// younger than the server's stuck limit, its head not started.
struct FreshConnection {
  int fd = -1;
  int64_t since_ns = 0;     // accepted, or its last reply sent
  bool head_begun = false;  // the server has read part of a request from it
};

/// Of `fresh`, the index of the one to close: the oldest whose client has sent
/// nothing, not even into its socket's receive buffer (a flood's connection),
/// before any whose request has arrived and waits to be read (issue 53: a
/// scrape among 1,500 flooding connections was reset); else the oldest.
/// Checks the buffers oldest first, so a flood costs one ioctl per eviction.
/// nullopt when `fresh` is empty.
std::optional<size_t> FreshConnectionToGo(const std::vector<FreshConnection>& fresh);

}  // namespace gputriage
