// The Kineto trace reader over an already opened source (the importer opens each
// input once, so a pipe's head read for format detection is not lost).
#pragma once

#include <memory>

#include "gputriage/model.h"
#include "gputriage/status.h"
#include "src/util/byte_source.h"

namespace gputriage {

/// Reads a PyTorch profiler trace from `source`, as ImportKinetoTrace does.
StatusOr<Recording> ImportKinetoTraceFromSource(std::unique_ptr<ByteSource> source);

}  // namespace gputriage
