// `gputriage record --live`: the job's steps, their phases and the verdict so
// far, redrawn on the recorder's terminal every second (src/top/live_record_screen.h).
#pragma once

#include <functional>

#include "gputriage/diagnosis.h"
#include "src/record/recorder.h"

namespace gputriage::cli {

/// Chains onto `options`' on_steps and on_second (and takes on_held_steps): keeps
/// the latest steps, final and still held, and, each second, judges them and
/// redraws the screen in a footer at the bottom of the terminal (stderr), the
/// job's own output scrolling above it (src/cli/terminal_footer.h). Returns what
/// gives the terminal back: call it once recording has ended, before the report.
std::function<void()> AddLiveScreen(WorkloadClass workload, RecordOptions& options);

}  // namespace gputriage::cli
