#include "src/cli/record_live.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "src/top/live_record_screen.h"

namespace gputriage::cli {
namespace {

int TerminalWidth() {
  winsize size{};
  if (ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return std::min<int>(size.ws_col, 200);
  return 100;
}

struct LiveState {
  LiveStepWindow window;
  std::vector<MarkedStep> held;  // ended, not yet final: shown at once
  size_t drawn = 0;  // lines on the terminal from the last redraw
};

}  // namespace

void AddLiveScreen(WorkloadClass workload, RecordOptions& options) {
  auto state = std::make_shared<LiveState>();
  options.on_steps = [state, previous = options.on_steps](const std::vector<MarkedStep>& steps) {
    if (previous) previous(steps);
    state->window.Add(steps);
  };
  options.on_held_steps = [state](const std::vector<MarkedStep>& held) { state->held = held; };
  options.on_second = [state, workload, previous = options.on_second](const Recording& rec, TimeNs elapsed) {
    if (previous) previous(rec, elapsed);
    // The latest steps judged as a recording of their own: the same analysis and
    // rules as the final report, over a window of the run.
    Run run;
    Recording window;
    window.source_path = rec.source_path;
    window.format = "step-markers";
    window.metadata = rec.metadata;
    window.marked_steps = state->window.Steps(state->held);
    run.recordings.push_back(std::move(window));
    DiagnoseOptions diagnose;
    diagnose.workload = workload;
    const Diagnosis d = Diagnose(run, diagnose);
    std::vector<Finding> findings;
    for (const auto& f : d.findings)
      if (f.origin == "markers" || f.origin == "host") findings.push_back(f);
    const auto lines = RenderLiveRecordScreen(d.recordings.empty() ? StepMarkerAnalysis{} : d.recordings[0].marked,
                                              findings, state->window.total() + static_cast<int64_t>(state->held.size()), elapsed,
                                              TerminalWidth());
    const std::string text = AnsiRedraw(lines, state->drawn);
    state->drawn = std::max(state->drawn, lines.size());
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  };
}

}  // namespace gputriage::cli
