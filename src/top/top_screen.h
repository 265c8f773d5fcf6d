// `gputriage top`'s screen as plain lines: what the terminal shows for a view
// of the agent's GPUs (agent.h: AgentView) at a given size. Pure: the curses
// front end (top_terminal.cc) only draws these lines, so layout is tested
// without a terminal and a resize is just another call.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "src/agent/agent.h"

namespace gputriage {

enum class TopSort { kIndex, kUtil, kMemory, kPower, kIdleCost };
const char* TopSortName(TopSort sort);

struct TopUiState {
  TopSort sort = TopSort::kIndex;
  bool reverse = false;
  size_t selected = 0;  // position in the sorted list
  bool help = false;
};

/// How a line is drawn: the terminal maps these to colours and attributes.
enum class LineStyle { kNormal, kTitle, kHeader, kSelected, kHigh, kModerate, kLow, kDim };

struct ScreenLine {
  std::string text;  // UTF-8, at most `width` columns
  LineStyle style = LineStyle::kNormal;
};

/// The screen for `view` (null: nothing sampled yet) at width × height.
std::vector<ScreenLine> RenderTopScreen(const AgentView* view, const TopUiState& ui, int width, int height,
                                        const std::string& clock);

/// The GPUs of `view` in the order `ui` sorts them (indexes into view.gpus).
std::vector<size_t> SortedGpus(const AgentView& view, const TopUiState& ui);

/// Values 0..100 as block characters, the newest at the right; NaN is blank.
std::string Sparkline(const std::vector<float>& values, int width);

/// Columns a UTF-8 string takes (every code point one column here).
int DisplayWidth(std::string_view text);
/// The first `width` columns of `text`, padded with spaces to exactly `width`.
std::string FitColumns(std::string_view text, int width);

}  // namespace gputriage
