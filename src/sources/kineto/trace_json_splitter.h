// Splits a Chrome-trace JSON document (Kineto's output) into its top-level
// members and the elements of its "traceEvents" array, without building the
// document. Memory is one read buffer plus the largest single event, whatever the
// file size. Each element is handed out as raw JSON text that the event parser
// then reads with simdjson.
//
// Kineto writes the closing "]}" only when the profiler finishes, so a file from a
// crashed job simply stops; we report that as truncation, not as an error, after
// handing out every complete event.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gputriage/status.h"
#include "src/util/byte_source.h"

namespace gputriage {

/// Bytes guaranteed readable after every view handed to a callback (simdjson
/// needs SIMDJSON_PADDING = 64).
constexpr size_t kSplitterPadding = 64;

struct SplitOutcome {
  int64_t bytes = 0;           // uncompressed bytes read
  int64_t events = 0;          // traceEvents elements handed out
  bool saw_trace_events = false;
  bool truncated = false;
  std::string truncation_note;  // what was lost and where
  int64_t trailing_bytes = 0;   // non-space bytes after the trace's closing bracket (ignored)
  int64_t trailing_offset = -1; // where they start
};

class TraceJsonSplitter {
 public:
  /// Called for each top-level member other than "traceEvents" (raw value text).
  using MemberCallback = std::function<Status(std::string_view key, std::string_view raw_value)>;
  /// Called for each element of "traceEvents"; `offset` is its byte position.
  using EventCallback = std::function<Status(std::string_view raw_event, int64_t offset)>;

  explicit TraceJsonSplitter(ByteSource& source, size_t chunk_bytes = size_t{4} << 20);

  /// Reads the whole source. Errors: not JSON / not an object or array (kUnimplemented),
  /// malformed structure (kDataLoss, with byte offset), I/O failures. A callback's
  /// error stops the run and is returned.
  StatusOr<SplitOutcome> Run(const MemberCallback& on_member, const EventCallback& on_event);

 private:
  enum class ScanResult { kComplete, kNeedMore, kMalformed };

  Status Fill();                  // compacts and reads more; sets eof_
  StatusOr<int> PeekNonSpace();   // next non-whitespace byte, -1 at end of data
  /// Scans the value starting at begin_; on kComplete sets *length.
  StatusOr<ScanResult> ScanValue(size_t* length);
  int64_t Offset() const { return base_offset_ + static_cast<int64_t>(begin_); }
  Status Malformed(const std::string& what) const;
  Status ReadArray(const EventCallback& on_event, SplitOutcome& outcome);

  ByteSource& source_;
  std::vector<char> buffer_;  // capacity_ + kSplitterPadding bytes
  size_t capacity_;
  size_t begin_ = 0;  // first unconsumed byte
  size_t end_ = 0;    // one past the last valid byte
  int64_t base_offset_ = 0;  // file offset of buffer_[0]
  bool eof_ = false;
  Status read_error_;  // a decompression error met at the end of the data
};

}  // namespace gputriage
