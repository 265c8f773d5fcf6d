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
#include <deque>
#include <functional>
#include <memory>
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

/// A run of whole traceEvents elements cut out of the stream, to be read on another
/// thread while the splitter goes on. Where a run ends is a guess (the first
/// "}, {" past a size): it is right when the run reads as an array of events, and
/// when it does not, the splitter re-reads it one event at a time (Rewind), so a
/// wrong guess costs time, never a different result.
struct EventRun {
  int64_t index = 0;         // 0, 1, 2... in stream order
  int64_t offset = 0;        // file offset of its first element
  // The run is not copied: it stays in the splitter's read buffer, which it keeps
  // alive, with at least kSplitterPadding readable bytes after it that the splitter
  // no longer writes.
  std::shared_ptr<const char[]> buffer;
  const char* begin = nullptr;  // its first element, in `buffer`
  size_t elements_bytes = 0;
  std::string separator;     // the bytes after them up to the next element (",\n  ")
  std::string_view elements() const { return {begin, elements_bytes}; }
};

/// Whether `elements` (a run's elements, 64 readable bytes after them) are whole
/// JSON objects separated by commas, brackets matching by type: the runs a reader
/// may read in one pass. The splitter re-reads any other run one event at a time.
bool EventRunIsWellFormed(std::string_view elements);

/// Where the runs handed out stand.
struct RunProgress {
  int64_t merged = 0;   // runs with index < merged were read and taken: released
  int64_t failed = -1;  // the first run that did not read cleanly: re-read from its start
  int64_t events = 0;   // events in all runs taken so far
};

/// Reads runs elsewhere and takes their events in stream order.
class RunHandler {
 public:
  virtual ~RunHandler() = default;
  /// Takes a run; may wait for older ones to keep the number in flight bounded.
  virtual StatusOr<RunProgress> Submit(std::shared_ptr<const EventRun> run) = 0;
  /// Waits for every run handed out and takes them in order, up to the first failed one.
  virtual StatusOr<RunProgress> Drain() = 0;
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

  /// Hands runs of about `run_bytes` of events to `handler` instead of calling
  /// on_event for each (call before Run). Events the splitter reads itself (the
  /// array's head and tail, re-read runs) still go to on_event, after the handler
  /// has taken every run before them.
  void HandRunsTo(RunHandler* handler, size_t run_bytes);

 private:
  enum class ScanResult { kComplete, kNeedMore, kMalformed };

  Status Fill();                  // compacts and reads more; sets eof_
  StatusOr<int> PeekNonSpace();   // next non-whitespace byte, -1 at end of data
  /// Scans the value starting at begin_; on kComplete sets *length.
  StatusOr<ScanResult> ScanValue(size_t* length);
  int64_t Offset() const { return base_offset_ + static_cast<int64_t>(begin_); }
  Status Malformed(const std::string& what) const;
  Status ReadArray(const EventCallback& on_event, SplitOutcome& outcome);
  /// Cuts the next run out of the buffer when one fits; false when none was cut.
  StatusOr<bool> TryHandOutRun();
  /// Waits for the runs in flight (before the splitter reads anything itself).
  Status DrainRuns();
  Status Apply(const RunProgress& progress);
  /// Puts the bytes of runs from `index` on back in front of the buffer.
  void Rewind(int64_t index);

  /// The read buffer's bytes (buffer_ is shared with the runs cut from it).
  char* data() { return buffer_.get(); }
  const char* data() const { return buffer_.get(); }
  /// A fresh buffer of `capacity` (+ padding) holding [begin_, end_) of the old one
  /// at its start; the old one lives on as long as runs cut from it do.
  void MoveToNewBuffer(size_t capacity);

  ByteSource& source_;
  std::shared_ptr<char[]> buffer_;  // capacity_ + kSplitterPadding bytes
  size_t capacity_;
  // Buffers the splitter moved on from, reused once no run holds them: new memory
  // would cost a page fault per 4 KiB read.
  std::vector<std::shared_ptr<char[]>> spare_buffers_;
  size_t spare_capacity_ = 0;  // the capacity of every spare buffer
  size_t begin_ = 0;  // first unconsumed byte
  size_t end_ = 0;    // one past the last valid byte
  int64_t base_offset_ = 0;  // file offset of buffer_[0]
  bool eof_ = false;
  Status read_error_;  // a decompression error met at the end of the data

  RunHandler* run_handler_ = nullptr;
  size_t run_bytes_ = 0;
  int64_t next_run_index_ = 0;
  std::deque<std::shared_ptr<const EventRun>> runs_in_flight_;  // kept for a rewind until merged
  int64_t no_runs_before_ = 0;  // after a rewind: read one by one up to this offset
  int64_t run_events_ = 0;      // events taken from runs (RunProgress::events)
};

}  // namespace gputriage
