// `gputriage top`'s terminal (ncurses, used only in top_terminal.cc): draws
// RenderTopScreen's lines every refresh and on a resize, and reads the keys.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "gputriage/status.h"
#include "src/agent/agent.h"

namespace gputriage {

struct TopTerminalOptions {
  int refresh_ms = 500;  // redraw at least this often
};

/// Runs until `q` or `stop` becomes true. Errors: no terminal to draw on.
Status RunTopTerminal(const Agent& agent, const TopTerminalOptions& options, const std::atomic<bool>& stop);

}  // namespace gputriage
