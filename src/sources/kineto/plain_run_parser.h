// A reader for runs of trace events in the plain form profilers write: ASCII JSON
// whose strings the analyses read carry no escapes and whose numbers are short.
// That is every real trace we have seen, and reading it directly is 1.3-1.7x as
// fast on one core as simdjson's structural pass, the run's bracket check and the
// on-demand walk together (bench/event_reader_benchmark; reading events is the
// importer's largest cost). Anything else in a run (an escape in a name, a
// non-ASCII byte, a long or exponent number in a field we read, damage) makes it
// give up, and the run is read by simdjson (EventParser::ParseRun) instead: the
// result is the same either way, only the time differs.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>

#include "src/sources/kineto/kineto_json.h"

namespace gputriage::kineto {

/// Bytes that must be readable after `elements` (it scans strings 16 bytes at a time).
constexpr size_t kPlainRunPadding = 16;

/// Reads `elements` (traceEvents elements as in the file: "{...},\n  {...}", the
/// first byte '{', the last '}', kPlainRunPadding readable bytes after it) and calls
/// `on_event` for each with its position in `elements`. Accepts only valid JSON:
/// objects separated by commas, strings of printable ASCII, nesting at most 64 deep.
/// Returns false, possibly after some calls, when the run is not in that form or
/// holds a value it does not read exactly as EventParser does; the caller then
/// discards what it was given and reads the run with EventParser::ParseRun, which
/// for every run accepted here gives the same events.
bool ParsePlainRun(std::string_view elements, const std::function<void(const RawEvent&, size_t position)>& on_event);

}  // namespace gputriage::kineto
