// Reading sources into the canonical model.
#pragma once

#include <string>
#include <vector>

#include "gputriage/model.h"
#include "gputriage/status.h"

namespace gputriage {

/// Imports one PyTorch profiler (Kineto) chrome-trace file, `.json` or `.json.gz`
/// (compression is detected from the content). Streams: memory is bounded by one
/// read buffer and the compact records kept, not by the file size.
///
/// A file that ends early (crashed job) imports what is complete and sets
/// `stats.truncated` with a note on what was lost. Per-event problems are counted
/// in `stats.issues` and skipped. Errors: missing/unreadable file (kNotFound,
/// kIoError), not a trace (kUnimplemented), broken structure before any event
/// (kDataLoss); each names the file and byte position.
StatusOr<Recording> ImportKinetoTrace(const std::string& path);

/// The same from bytes in memory (tests, fuzzing); `name` is used in messages.
StatusOr<Recording> ImportKinetoTraceFromMemory(const std::string& name, std::string_view bytes);

/// Imports several files as the recordings (ranks) of one run.
StatusOr<Run> ImportRun(const std::vector<std::string>& paths);

}  // namespace gputriage
