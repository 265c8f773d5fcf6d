// `gputriage record --live`: the job's latest steps, the split of a step into
// its phases, and the verdict so far, as plain lines (top_screen.h's ScreenLine),
// redrawn in place on the recorder's terminal once a second. Pure, like top's
// screen: the recorder only prints these lines, so the layout is tested without
// a terminal.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <vector>

#include "gputriage/diagnosis.h"
#include "src/top/top_screen.h"

namespace gputriage {

/// The latest steps of a recording, at most `capacity` (older ones leave).
class LiveStepWindow {
 public:
  explicit LiveStepWindow(size_t capacity = 200) : capacity_(capacity) {}
  void Add(const std::vector<MarkedStep>& steps);
  /// The latest `capacity` steps: the final ones, then `held` (ended, not yet
  /// final: the recorder holds them 5 s for late device times), by start.
  std::vector<MarkedStep> Steps(const std::vector<MarkedStep>& held = {}) const;
  int64_t total() const { return total_; }

 private:
  size_t capacity_;
  std::deque<MarkedStep> steps_;
  int64_t total_ = 0;
};

/// The screen: `marked` (the window's steps as analysed), the findings judged on
/// them, the steps recorded so far and the time since the job started.
std::vector<ScreenLine> RenderLiveRecordScreen(const StepMarkerAnalysis& marked, const std::vector<Finding>& findings,
                                               int64_t steps_so_far, TimeNs elapsed_ns, int width);

/// A line as ANSI text: its style's colour or weight around its text.
std::string AnsiLine(const ScreenLine& line);

/// The lines as ANSI text for a terminal, each cleared to its end; `previous`
/// lines drawn last time are gone over first (the cursor goes back up to them).
std::string AnsiRedraw(const std::vector<ScreenLine>& lines, size_t previous);

}  // namespace gputriage
