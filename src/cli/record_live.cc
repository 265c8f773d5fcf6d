#include "src/cli/record_live.h"

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <mutex>

#include "src/cli/terminal_footer.h"
#include "src/top/live_record_screen.h"

namespace gputriage::cli {
namespace {

// The footer's rows at most: the screen's title, steps, phases and three verdicts.
constexpr int kFooterLines = 14;

struct LiveState {
  LiveStepWindow window;
  std::vector<MarkedStep> held;  // ended, not yet final: shown at once
  std::mutex footer_mutex;       // drawn from the recorder's loop, closed after it
  std::unique_ptr<TerminalFooter> footer;
};

}  // namespace

std::function<void()> AddLiveScreen(WorkloadClass workload, RecordOptions& options) {
  auto state = std::make_shared<LiveState>();
  state->footer = TerminalFooter::Open(STDERR_FILENO, kFooterLines);
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
    std::lock_guard<std::mutex> lock(state->footer_mutex);
    if (!state->footer) return;
    const auto lines = RenderLiveRecordScreen(d.recordings.empty() ? StepMarkerAnalysis{} : d.recordings[0].marked,
                                              findings, state->window.total() + static_cast<int64_t>(state->held.size()), elapsed,
                                              std::min(state->footer->width(), 200));
    std::vector<std::string> text;
    for (const auto& line : lines) text.push_back(AnsiLine(line));
    state->footer->Draw(text);
  };
  return [state] {
    std::lock_guard<std::mutex> lock(state->footer_mutex);
    state->footer.reset();
  };
}

}  // namespace gputriage::cli
