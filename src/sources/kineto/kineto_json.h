// The simdjson adapter for Kineto traces: turns the raw JSON text of one event or
// one top-level member into plain structs. simdjson is used nowhere else.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gputriage/model.h"
#include "gputriage/status.h"

namespace gputriage::kineto {

/// The fields of one trace event that gputriage uses. String views point into the
/// parser's buffer and stay valid until the next Parse call.
struct RawEvent {
  char ph = 0;
  std::string_view cat;
  std::string_view name;
  std::optional<int64_t> pid;  // numeric pid, or the number at the end of a pid string
  bool pid_cpu_functions = false;  // pid "CPU functions": torch.autograd.profiler's own export
  std::optional<int64_t> tid;  // numeric tid, or the number in "stream 7"
  std::optional<int64_t> ts_ns;
  std::optional<int64_t> dur_ns;
  bool ts_malformed = false;
  bool dur_malformed = false;
  // args
  std::optional<int64_t> external_id;  // "External id" or "external id"
  std::optional<int64_t> correlation;
  std::optional<int64_t> stream;
  std::optional<int64_t> device;
  std::optional<int64_t> registers_per_thread;
  std::optional<int64_t> shared_memory;
  std::optional<int64_t> bytes;
  std::optional<double> blocks_per_sm;
  std::optional<double> warps_per_sm;
  std::optional<double> occupancy_percent;
  std::optional<double> flops;
  bool has_grid = false;
  bool has_block = false;
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  std::string_view collective;        // "Collective name"
  std::string_view first_input_type;  // first non-empty entry of "Input type"
  std::string_view input_dims;        // raw JSON of "Input Dims" (record_shapes), parsed only where used
  // [memory] instant events (profile_memory=True)
  std::optional<int64_t> total_allocated;  // "Total Allocated" bytes after the event
  std::optional<int64_t> total_reserved;   // "Total Reserved"
  std::optional<int64_t> device_type;      // "Device Type": 0 CPU, 1 CUDA
  std::optional<int64_t> device_id;        // "Device Id"
  std::string_view label;             // args.labels (process_labels) or args.name (metadata)
};

/// How the readers read an args member, and which field of the event it fills:
/// the one list of the args keys gputriage uses, for the simdjson reader and the
/// plain-form run reader alike.
struct ArgTarget {
  enum class Kind { kUnused, kInt, kDouble, kDim3, kString, kFirstNonEmptyString, kRawArray };
  Kind kind = Kind::kUnused;
  std::optional<int64_t>* int_value = nullptr;  // kInt: an integer, or the number ending a string
  std::optional<double>* double_value = nullptr;  // kDouble
  bool* has_dim3 = nullptr;                      // kDim3: an array of integers
  uint32_t* dim3 = nullptr;
  std::string_view* text = nullptr;  // kString (when a string), kFirstNonEmptyString, kRawArray (the JSON text)
};
ArgTarget ArgTargetOf(std::string_view key, RawEvent& e);

/// `key` == `literal`, with the length known at compile time: an inline compare,
/// not a library call (each event has a dozen keys, read on every core).
template <size_t N>
inline bool KeyIs(std::string_view key, const char (&literal)[N]) {
  return key.size() == N - 1 && __builtin_memcmp(key.data(), literal, N - 1) == 0;
}

/// A number field written as a string ("flops": "1.5e9"), read with strtod: the
/// number at the text's start; nothing when it starts with none.
std::optional<double> DoubleFromText(std::string_view text);

/// Parses events one at a time, reusing its buffers.
class EventParser {
 public:
  EventParser();
  ~EventParser();
  EventParser(const EventParser&) = delete;
  EventParser& operator=(const EventParser&) = delete;

  /// `raw` must have 64 readable bytes after its end. Errors name the field.
  Status Parse(std::string_view raw, RawEvent* event);

  /// Reads a JSON array of events in one pass (a run of traceEvents elements cut
  /// out by the splitter, with '[' and ']' around them; 64 readable bytes after it)
  /// and calls `on_event` for each with its position in `array_text`. Returns false,
  /// possibly after some calls, when the text is not an array of events that all
  /// read cleanly: the caller then reads the run one event at a time with Parse().
  bool ParseRun(std::string_view array_text, const std::function<void(const RawEvent&, size_t position)>& on_event);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// What the top-level members other than traceEvents tell us.
struct TraceHeader {
  std::vector<Device> devices;
  std::optional<int64_t> base_time_ns;  // baseTimeNanoseconds
  int rank = -1;
  int world_size = -1;
  std::string backend;
  std::map<std::string, std::string> metadata;  // other scalar members, as text
};

/// Applies one top-level member to the header. Unknown members are kept as text
/// metadata when scalar, ignored otherwise. Errors name the member and field.
Status ApplyHeaderMember(std::string_view key, std::string_view raw_value, TraceHeader* header);

}  // namespace gputriage::kineto
