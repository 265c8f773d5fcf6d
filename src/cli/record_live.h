// `gputriage record --live`: the job's steps, their phases and the verdict so
// far, redrawn on the recorder's terminal every second (src/top/live_record_screen.h).
#pragma once

#include "gputriage/diagnosis.h"
#include "src/record/recorder.h"

namespace gputriage::cli {

/// Chains onto `options`' on_steps and on_second (and takes on_held_steps): keeps
/// the latest steps, final and still held, and,
/// each second, judges them and redraws the screen on stderr.
void AddLiveScreen(WorkloadClass workload, RecordOptions& options);

}  // namespace gputriage::cli
