#include "src/sources/snapshot/allocator_snapshot.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "src/sources/snapshot/pickle_data.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

constexpr size_t kMaxSnapshotBytes = size_t{1} << 30;
// Fields read, all devices together: a snapshot of a few million history entries
// is far below it; a pickle whose shared values make it look larger is refused.
constexpr int64_t kMaxFieldsRead = int64_t{256} << 20;

using Kind = PickleValue::Kind;

/// Reads a snapshot's parsed values into a recording, counting what it reads.
class SnapshotReader {
 public:
  SnapshotReader(const PickleValue& root, Recording& rec) : root_(root), rec_(rec) {}

  Status Read() {
    // torch 2.x: {"segments", "device_traces", "allocator_settings", ...}; 1.13: the segments alone.
    const PickleValue* segments = root_.kind == Kind::kDict ? root_.Get("segments") : &root_;
    if (segments == nullptr || !segments->IsSequence())
      return InvalidArgumentError(rec_.source_path + ": a pickle, but not an allocator snapshot: no \"segments\" list");
    for (const PickleValue* segment : segments->items) RETURN_IF_ERROR(ReadSegment(*segment));
    if (const PickleValue* traces = root_.Get("device_traces"); traces != nullptr && traces->IsSequence())
      for (size_t device = 0; device < traces->items.size() && device < 64; ++device)
        RETURN_IF_ERROR(ReadHistory(static_cast<int>(device), *traces->items[device]));
    if (const PickleValue* settings = root_.Get("allocator_settings")) ReadSettings(*settings);
    for (auto& [device, state] : states_) rec_.allocator_states.push_back(std::move(state));
    return Status::Ok();
  }

 private:
  Status Count(size_t n) {
    read_ += static_cast<int64_t>(n) + 1;
    if (read_ > kMaxFieldsRead)
      return InvalidArgumentError(rec_.source_path + ": the snapshot's values refer to each other too many times "
                                                     "(over 256 Mi fields read): refused as too large");
    return Status::Ok();
  }
  static int64_t Field(const PickleValue& dict, std::string_view key, int64_t fallback = 0) {
    const PickleValue* v = dict.Get(key);
    return v == nullptr ? fallback : v->AsInt(fallback);
  }
  static std::string_view TextField(const PickleValue& dict, std::string_view key) {
    const PickleValue* v = dict.Get(key);
    return v == nullptr ? "?" : v->AsText("?");
  }
  AllocatorState& StateOf(int device) {
    AllocatorState& s = states_[device];
    s.device = device;
    return s;
  }

  Status ReadSegment(const PickleValue& segment) {
    if (segment.kind != Kind::kDict) return InvalidArgumentError(rec_.source_path + ": a segment that is not a dict");
    RETURN_IF_ERROR(Count(segment.entries.size()));
    const int device = static_cast<int>(std::clamp<int64_t>(Field(segment, "device"), 0, 63));
    AllocatorState& s = StateOf(device);
    ++s.segments;
    s.reserved_bytes += Field(segment, "total_size");
    s.allocated_bytes += Field(segment, "allocated_size");
    s.active_bytes += Field(segment, "active_size");
    s.requested_bytes += Field(segment, "requested_size");
    if (const PickleValue* blocks = segment.Get("blocks"); blocks != nullptr && blocks->IsSequence()) {
      RETURN_IF_ERROR(Count(blocks->items.size()));
      for (const PickleValue* block : blocks->items) {
        if (block->kind != Kind::kDict) continue;
        auto& [count, bytes] = s.blocks[std::string(TextField(*block, "state"))];
        ++count;
        bytes += Field(*block, "size");
      }
    }
    return Status::Ok();
  }

  /// "file:line in function" of the frame that asked: the innermost Python frame
  /// outside torch's own files (the job's line), else the innermost Python frame,
  /// else the innermost frame (C++ frames come first when the history kept them:
  /// torch::unwind, the allocator); "" without frames.
  static std::string WhereOf(const PickleValue& entry) {
    const PickleValue* frames = entry.Get("frames");
    if (frames == nullptr || !frames->IsSequence() || frames->items.empty()) return "";
    const PickleValue* python = nullptr;
    const PickleValue* job = nullptr;
    for (const PickleValue* f : frames->items) {
      const std::string_view file = TextField(*f, "filename");
      if (!EndsWith(file, ".py")) continue;
      if (python == nullptr) python = f;
      if (!Contains(file, "/torch/")) {
        job = f;
        break;
      }
    }
    const PickleValue& f = job != nullptr ? *job : python != nullptr ? *python : *frames->items.front();
    return fmt::format("{}:{} in {}", TextField(f, "filename"), Field(f, "line"), TextField(f, "name"));
  }

  Status ReadHistory(int device, const PickleValue& entries) {
    if (!entries.IsSequence()) return Status::Ok();
    RETURN_IF_ERROR(Count(entries.items.size()));
    AllocatorState& s = StateOf(device);
    std::vector<MemoryPoint> deltas;  // allocated and reserved changes, in the history's order
    std::vector<size_t> oom_at;       // each OOM's place among them
    for (const PickleValue* entry : entries.items) {
      if (entry->kind != Kind::kDict) continue;
      RETURN_IF_ERROR(Count(entry->entries.size()));
      const std::string_view action = TextField(*entry, "action");
      ++s.actions[std::string(action)];
      const int64_t size = Field(*entry, "size");
      const TimeNs t = Field(*entry, "time_us") * 1000;
      if (action == "oom") {
        s.ooms.push_back({t, size, Field(*entry, "device_free", -1), WhereOf(*entry)});
        oom_at.push_back(deltas.size());
      }
      const int64_t allocated = action == "alloc" ? size : action == "free_completed" ? -size : 0;
      const int64_t reserved = action == "segment_alloc" || action == "segment_map"      ? size
                               : action == "segment_free" || action == "segment_unmap" ? -size
                                                                                       : 0;
      // Every change is kept (the pickle's value limit bounds them): one left out would
      // shift every level before it, which the snapshot's state anchors.
      if (allocated != 0 || reserved != 0) deltas.push_back({t, allocated, reserved});
    }
    AddCurve(s, std::move(deltas), oom_at);
    return Status::Ok();
  }

  /// The history's changes as levels: the snapshot's state is the level after
  /// the last entry, so each earlier level is that less the changes since.
  void AddCurve(AllocatorState& s, std::vector<MemoryPoint> deltas, const std::vector<size_t>& oom_at) {
    if (deltas.empty()) return;
    int64_t allocated = s.allocated_bytes, reserved = s.reserved_bytes;
    for (const auto& d : deltas) allocated -= d.allocated, reserved -= d.reserved;
    if (allocated < 0 || reserved < 0)
      rec_.stats.AddIssue(IssueSeverity::kWarning, "snapshot_history_inconsistent",
                          fmt::format("{}: device {}: the history's frees exceed what the snapshot holds "
                                      "(its state and history disagree): the curve's level is off by {} bytes",
                                      rec_.source_path, s.device, -std::min(allocated, reserved)));
    DeviceMemoryUse use;
    use.device = s.device;
    use.events = static_cast<int64_t>(deltas.size());
    size_t next_oom = 0;
    for (size_t i = 0; i <= deltas.size(); ++i) {
      for (; next_oom < oom_at.size() && oom_at[next_oom] == i && next_oom < s.ooms.size(); ++next_oom)
        s.ooms[next_oom].allocated_bytes = allocated, s.ooms[next_oom].reserved_bytes = reserved;
      if (i == deltas.size()) break;
      allocated += deltas[i].allocated, reserved += deltas[i].reserved;
      use.curve.push_back({deltas[i].t, allocated, reserved});
    }
    FinishMemoryCurve(use);
    rec_.memory_use.push_back(std::move(use));
  }

  void ReadSettings(const PickleValue& settings) {
    for (const auto& [key, value] : settings.entries) {
      if (!key->IsString() || key->text.size() > 64) continue;
      std::string text;
      if (value->kind == Kind::kBool) text = value->integer ? "true" : "false";
      else if (value->kind == Kind::kInt) text = std::to_string(value->integer);
      else if (value->kind == Kind::kFloat) text = fmt::format("{}", value->real);
      else if (value->IsString() && value->text.size() <= 256) text = value->text;
      else continue;  // nested (roundup_power2_divisions): not a setting a user sets as such
      rec_.metadata["allocator." + key->text] = text;
    }
  }

  const PickleValue& root_;
  Recording& rec_;
  std::map<int, AllocatorState> states_;
  int64_t read_ = 0;
};

/// The first OOM the history recorded, in the settings the out_of_memory verdict
/// reads (src/analysis/step_memory.cc): the device, the request, what was free,
/// the frame that asked, and the allocator's levels replayed to that moment.
void NoteFirstOutOfMemory(Recording& rec) {
  const AllocatorState* first_state = nullptr;
  const OomRecord* first = nullptr;
  for (const auto& s : rec.allocator_states)
    for (const auto& oom : s.ooms)
      if (first == nullptr || oom.t < first->t) first_state = &s, first = &oom;
  if (first == nullptr) return;
  auto& m = rec.metadata;
  m["oom.device"] = fmt::format("cuda:{}", first_state->device);
  m["oom.source"] = "allocator-snapshot";
  m["oom.requested_bytes"] = std::to_string(first->requested_bytes);
  if (first->device_free_bytes >= 0) m["oom.free_bytes"] = std::to_string(first->device_free_bytes);
  if (!first->where.empty()) m["oom.where"] = first->where;
  if (first->allocated_bytes >= 0) m["oom.allocator_allocated_bytes"] = std::to_string(first->allocated_bytes);
  if (first->reserved_bytes >= 0) m["oom.allocator_reserved_bytes"] = std::to_string(first->reserved_bytes);
}

}  // namespace

bool LooksLikePickle(std::string_view head) {
  return head.size() >= 2 && static_cast<unsigned char>(head[0]) == 0x80 && head[1] >= 2 && head[1] <= 5;
}

StatusOr<Recording> AllocatorSnapshotFromBytes(std::string_view bytes, const std::string& name) {
  ASSIGN_OR_RETURN(auto doc, ReadPickle(bytes, name));
  Recording rec;
  rec.source_path = name;
  rec.format = "allocator-snapshot";
  rec.stats.bytes_read = static_cast<int64_t>(bytes.size());
  RETURN_IF_ERROR(SnapshotReader(*doc->root, rec).Read());
  if (doc->trailing_bytes > 0)
    rec.stats.AddIssue(IssueSeverity::kWarning, "snapshot_trailing_bytes",
                       fmt::format("{}: {} bytes after the pickle's end were not read (a second pickle, or data "
                                   "appended to the file)",
                                   name, doc->trailing_bytes));
  NoteFirstOutOfMemory(rec);
  for (const auto& s : rec.allocator_states)
    for (const auto& oom : s.ooms)
      rec.stats.AddIssue(IssueSeverity::kWarning, "out_of_memory",
                         fmt::format("device {}: the allocator ran out of memory: a request of {} bytes with {} "
                                     "bytes free on the device{}",
                                     s.device, oom.requested_bytes,
                                     oom.device_free_bytes >= 0 ? std::to_string(oom.device_free_bytes) : "unknown",
                                     oom.where.empty() ? "" : " (" + oom.where + ")"));
  return rec;
}

StatusOr<Recording> ImportAllocatorSnapshot(std::unique_ptr<ByteSource> source) {
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    ASSIGN_OR_RETURN(const size_t n, source->Read(buf, sizeof buf));
    if (n == 0) break;
    bytes.append(buf, n);
    if (bytes.size() > kMaxSnapshotBytes)
      return InvalidArgumentError(source->name() + ": an allocator snapshot over 1 GiB: not read");
  }
  return AllocatorSnapshotFromBytes(bytes, source->name());
}

}  // namespace gputriage
