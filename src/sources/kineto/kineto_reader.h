// The Kineto trace reader over an already opened source (the importer opens each
// input once, so a pipe's head read for format detection is not lost).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "gputriage/import.h"
#include "gputriage/model.h"
#include "gputriage/status.h"
#include "src/util/byte_source.h"

namespace gputriage {

/// How a trace's events are read: runs of them (the splitter cuts them, the plain
/// form reader reads them, kineto_reader.cc merges them in file order) on worker
/// threads or on the reading thread, or one by one through simdjson.
struct KinetoReadOptions {
  /// Worker threads reading runs; 0 = one per core. With one core, or threads < 0,
  /// the splitter's thread reads the runs itself. The result is the same.
  int threads = 0;
  /// false: every event read one by one through simdjson, never in runs (the
  /// reference the tests compare the runs with). The result is the same.
  bool runs = true;
  /// About how many bytes of events one run holds.
  size_t run_bytes = size_t{1} << 20;
  /// Events held in memory while reading; past it they are sorted into runs in a
  /// scratch file (src/model/event_streams.h). The result does not depend on it.
  size_t memory_budget_bytes = kDefaultTraceMemoryBudget;
  std::string scratch_directory;  // "" = $TMPDIR, else /tmp
};

/// Reads a PyTorch profiler trace from `source`, as ImportKinetoTrace does.
StatusOr<Recording> ImportKinetoTraceFromSource(std::unique_ptr<ByteSource> source,
                                                const KinetoReadOptions& options = {});

/// The same from memory with the reading set (tests compare the two ways).
StatusOr<Recording> ImportKinetoTraceFromMemory(const std::string& name, std::string_view bytes,
                                                const KinetoReadOptions& options);

}  // namespace gputriage
