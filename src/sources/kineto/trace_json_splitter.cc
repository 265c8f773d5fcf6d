#include "src/sources/kineto/trace_json_splitter.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <fmt/format.h>

namespace gputriage {
namespace {

// One event or member above 128 MiB is corrupt (the longest real kernel names and
// stacks are kilobytes); the bound keeps a hostile value from costing gigabytes.
constexpr size_t kMaxValueBytes = size_t{128} << 20;

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string Printable(int c) {
  if (c >= 0x20 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
  return fmt::format("byte 0x{:02x}", c & 0xff);
}


/// Where the bytes that matter to the scanner sit in a 64-byte block: bit i
/// stands for byte i. Reads 64 bytes; the buffer's padding makes that safe.
struct BlockMasks {
  uint64_t quote = 0;
  uint64_t backslash = 0;
  uint64_t open = 0;   // '{' or '['
  uint64_t close = 0;  // '}' or ']'
};

inline __attribute__((always_inline)) BlockMasks ClassifyBlock(const char* p) {
  BlockMasks m;
#if defined(__SSE2__)
  // 16 bytes per compare; the splitter touches every byte of the file, so this is
  // the importer's hot loop. '{' and '[' differ from each other only in bit 5, as
  // do '}' and ']': one compare after setting it finds both.
  const __m128i bit5 = _mm_set1_epi8(0x20);
  for (int part = 0; part < 4; ++part) {
    const __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * part));
    const __m128i folded = _mm_or_si128(chunk, bit5);
    auto bits = [&](__m128i eq) {
      return static_cast<uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(eq))) << (16 * part);
    };
    m.quote |= bits(_mm_cmpeq_epi8(chunk, _mm_set1_epi8('"')));
    m.backslash |= bits(_mm_cmpeq_epi8(chunk, _mm_set1_epi8('\\')));
    m.open |= bits(_mm_cmpeq_epi8(folded, _mm_set1_epi8('{')));
    m.close |= bits(_mm_cmpeq_epi8(folded, _mm_set1_epi8('}')));
  }
#else
  for (int i = 0; i < 64; ++i) {
    const uint64_t bit = uint64_t{1} << i;
    switch (p[i]) {
      case '"': m.quote |= bit; break;
      case '\\': m.backslash |= bit; break;
      case '{': case '[': m.open |= bit; break;
      case '}': case ']': m.close |= bit; break;
      default: break;
    }
  }
#endif
  return m;
}

/// One byte of the byte-by-byte scan (blocks with escapes): updates the string
/// state and says whether the byte is a bracket outside strings.
inline bool BracketOutsideStrings(char c, bool& in_string, bool& escaped) {
  if (in_string) {
    if (escaped) escaped = false;
    else if (c == '\\') escaped = true;
    else if (c == '"') in_string = false;
    return false;
  }
  if (c == '"') {
    in_string = true;
    return false;
  }
  return c == '{' || c == '[' || c == '}' || c == ']';
}

/// Bit i set when an odd number of bits at positions <= i are set: with quote
/// bits in, the bytes inside strings (from the opening quote on).
uint64_t PrefixXor(uint64_t x) {
  x ^= x << 1;
  x ^= x << 2;
  x ^= x << 4;
  x ^= x << 8;
  x ^= x << 16;
  x ^= x << 32;
  return x;
}

}  // namespace

bool EventRunIsWellFormed(std::string_view elements) {
  // Stricter than the splitter (brackets must match by type, every element must be
  // an object, depth at most 64): a run this accepts is cut into exactly the
  // elements the splitter would cut, and simdjson's lazy reading of each is the
  // same as its reading of the element alone. Anything else goes back to the
  // splitter, which then says what it says about damage.
  const char* const p = elements.data();
  const size_t n = elements.size();
  uint64_t kinds = 0;  // bit d: the bracket opened at depth d is '{'
  int depth = 0;
  size_t element_start = 0;  // where the next element must begin
  bool ended = false;        // the last element closed at the end of the run
  // Each bracket outside strings, in order. Between elements there are only
  // whitespace and one comma (checked here), so no quote, and the string state
  // the block scan carries stays right.
  auto bracket = [&](size_t i) -> bool {
    const char c = p[i];
    if (c == '{' || c == '[') {
      if (depth == 0 && (c != '{' || i != element_start)) return false;
      if (depth >= 64) return false;
      if (c == '{') kinds |= uint64_t{1} << depth;
      else kinds &= ~(uint64_t{1} << depth);
      ++depth;
      return true;
    }
    if (depth == 0) return false;
    --depth;
    if (((kinds >> depth) & 1) != (c == '}' ? 1u : 0u)) return false;
    if (depth > 0) return true;
    size_t q = i + 1;
    while (q < n && IsSpace(p[q])) ++q;
    if (q == n) {
      ended = true;
      return true;
    }
    if (p[q] != ',') return false;
    ++q;
    while (q < n && IsSpace(p[q])) ++q;
    if (q >= n || p[q] != '{') return false;
    element_start = q;
    return true;
  };
  if (n == 0 || p[0] != '{') return false;
  bool in_string = false, escaped = false;
  for (size_t pos = 0; pos < n; pos += 64) {
    const size_t len = std::min<size_t>(64, n - pos);
    const uint64_t valid = len == 64 ? ~uint64_t{0} : (uint64_t{1} << len) - 1;
    const BlockMasks m = ClassifyBlock(p + pos);
    if ((m.backslash & valid) == 0 && !escaped) {
      const uint64_t quote = m.quote & valid;
      const uint64_t inside = PrefixXor(quote) ^ (in_string ? ~uint64_t{0} : 0);
      for (uint64_t brackets = (m.open | m.close) & valid & ~inside; brackets != 0; brackets &= brackets - 1) {
        if (ended || !bracket(pos + static_cast<size_t>(__builtin_ctzll(brackets)))) return false;
      }
      in_string ^= (__builtin_popcountll(quote) & 1) != 0;
    } else {
      for (size_t i = pos; i < pos + len; ++i)
        if (BracketOutsideStrings(p[i], in_string, escaped) && (ended || !bracket(i))) return false;
    }
  }
  return ended && !in_string;
}

TraceJsonSplitter::TraceJsonSplitter(ByteSource& source, size_t chunk_bytes)
    : source_(source), buffer_(std::make_shared<char[]>(chunk_bytes + kSplitterPadding)), capacity_(chunk_bytes) {}

void TraceJsonSplitter::MoveToNewBuffer(size_t capacity) {
  std::shared_ptr<char[]> fresh;
  if (capacity == spare_capacity_) {
    // Only this thread hands out references to the buffers, so a count of one
    // cannot be outdated: no run holds that buffer any more.
    auto free = std::find_if(spare_buffers_.begin(), spare_buffers_.end(),
                             [](const auto& buffer) { return buffer.use_count() == 1; });
    if (free != spare_buffers_.end()) {
      fresh = std::move(*free);
      spare_buffers_.erase(free);
    }
  }
  if (!fresh) fresh = std::make_shared_for_overwrite<char[]>(capacity + kSplitterPadding);
  if (capacity_ != spare_capacity_) spare_buffers_.clear(), spare_capacity_ = capacity_;
  // Runs in flight span a few buffers at most (RunPool keeps a few MiB of them).
  if (spare_buffers_.size() < 4) spare_buffers_.push_back(buffer_);
  std::memcpy(fresh.get(), data() + begin_, end_ - begin_);
  std::memset(fresh.get() + (end_ - begin_), 0, kSplitterPadding);
  base_offset_ += static_cast<int64_t>(begin_);
  end_ -= begin_;
  begin_ = 0;
  buffer_ = std::move(fresh);
  capacity_ = capacity;
}

Status TraceJsonSplitter::Malformed(const std::string& what) const {
  return DataLossError(fmt::format("{}: byte {}: {}", source_.name(), Offset(), what));
}

Status TraceJsonSplitter::Fill() {
  if (eof_) return Status::Ok();
  if (begin_ > 0 && buffer_.use_count() > 1) {
    // Runs in flight still read this buffer: the unconsumed tail moves to a new one
    // (runs are cut so that the tail is short).
    MoveToNewBuffer(capacity_);
  } else if (begin_ > 0) {  // compact: keep the unconsumed tail at the front
    std::memmove(data(), data() + begin_, end_ - begin_);
    base_offset_ += static_cast<int64_t>(begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == capacity_) {  // one value fills the whole buffer: grow
    if (capacity_ >= kMaxValueBytes) {
      return Malformed("a single JSON value is larger than 128 MiB; the file is corrupt");
    }
    MoveToNewBuffer(capacity_ * 2);
  }
  auto got = source_.Read(data() + end_, capacity_ - end_);
  if (!got.ok()) {
    // Decompression damage: keep what was decoded, treat the rest as lost.
    read_error_ = got.status();
    eof_ = true;
  } else if (*got == 0) {
    eof_ = true;
  } else {
    end_ += *got;
  }
  std::memset(data() + end_, 0, kSplitterPadding);
  return Status::Ok();
}

StatusOr<int> TraceJsonSplitter::PeekNonSpace() {
  while (true) {
    while (begin_ < end_ && IsSpace(data()[begin_])) ++begin_;
    if (begin_ < end_) return static_cast<unsigned char>(data()[begin_]);
    if (eof_) return -1;
    RETURN_IF_ERROR(Fill());
  }
}

StatusOr<TraceJsonSplitter::ScanResult> TraceJsonSplitter::ScanValue(size_t* length) {
  // State survives refills: offsets are relative to the value's first byte.
  size_t offset = 0;
  int depth = 0;
  bool in_string = false;
  bool escaped = false;  // the previous byte was a backslash inside a string
  enum class Kind { kUnknown, kContainer, kString, kScalar } kind = Kind::kUnknown;
  while (true) {
    const char* start = data() + begin_;
    const char* p = start + offset;
    const char* const limit = data() + end_;
    if (kind == Kind::kUnknown && p < limit) {
      kind = (*p == '{' || *p == '[') ? Kind::kContainer : *p == '"' ? Kind::kString : Kind::kScalar;
    }
    auto complete_at = [&](const char* end) {
      *length = static_cast<size_t>(end - start);
      return ScanResult::kComplete;
    };
    if (kind == Kind::kScalar) {
      for (; p < limit; ++p) {
        if (*p == ',' || *p == '}' || *p == ']' || IsSpace(*p)) return complete_at(p);
      }
    } else if (kind == Kind::kString) {
      // Member names and string members: short, read byte by byte.
      if (offset == 0) ++p;  // the opening quote
      for (; p < limit; ++p) {
        if (escaped) escaped = false;
        else if (*p == '\\') escaped = true;
        else if (*p == '"') return complete_at(p + 1);
      }
    } else if (kind == Kind::kContainer) {
      while (p < limit) {
        const size_t n = std::min<size_t>(64, static_cast<size_t>(limit - p));
        const uint64_t valid = n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
        const BlockMasks m = ClassifyBlock(p);
        const uint64_t quote = m.quote & valid;
        if ((m.backslash & valid) == 0 && !escaped) {
          // No escapes: string extents follow from the quote parity alone.
          const uint64_t inside = PrefixXor(quote) ^ (in_string ? ~uint64_t{0} : 0);
          uint64_t brackets = (m.open | m.close) & valid & ~inside;
          while (brackets != 0) {
            const int i = __builtin_ctzll(brackets);
            if ((m.open >> i) & 1) {
              ++depth;
            } else if (--depth == 0) {
              return complete_at(p + i + 1);
            } else if (depth < 0) {
              return ScanResult::kMalformed;
            }
            brackets &= brackets - 1;
          }
          in_string ^= (__builtin_popcountll(quote) & 1) != 0;
        } else {
          // A block with escapes (rare in traces): byte by byte.
          for (size_t i = 0; i < n; ++i) {
            const char c = p[i];
            if (!BracketOutsideStrings(c, in_string, escaped)) continue;
            if (c == '{' || c == '[') {
              ++depth;
            } else {
              if (--depth == 0) return complete_at(p + i + 1);
              if (depth < 0) return ScanResult::kMalformed;
            }
          }
        }
        p += n;
      }
    }
    offset = static_cast<size_t>(p - start);
    if (eof_) {
      *length = offset;
      // A bare scalar may end the data; anything else is cut off.
      return kind == Kind::kScalar && offset > 0 ? ScanResult::kComplete : ScanResult::kNeedMore;
    }
    RETURN_IF_ERROR(Fill());
  }
}

void TraceJsonSplitter::HandRunsTo(RunHandler* handler, size_t run_bytes) {
  run_handler_ = handler;
  // A run is cut from the buffer, so it must fit there with room to spare.
  run_bytes_ = std::max<size_t>(1, std::min(run_bytes, capacity_ / 4));
}

Status TraceJsonSplitter::Apply(const RunProgress& progress) {
  run_events_ = progress.events;
  while (!runs_in_flight_.empty() && runs_in_flight_.front()->index < progress.merged) runs_in_flight_.pop_front();
  if (progress.failed >= 0) Rewind(progress.failed);
  return Status::Ok();
}

Status TraceJsonSplitter::DrainRuns() {
  while (!runs_in_flight_.empty()) {
    ASSIGN_OR_RETURN(RunProgress progress, run_handler_->Drain());
    RETURN_IF_ERROR(Apply(progress));
    if (progress.failed < 0) runs_in_flight_.clear();
  }
  return Status::Ok();
}

void TraceJsonSplitter::Rewind(int64_t index) {
  while (!runs_in_flight_.empty() && runs_in_flight_.front()->index < index) runs_in_flight_.pop_front();
  if (runs_in_flight_.empty()) return;
  // The runs' bytes, exactly as they were in the file, then what the buffer holds.
  std::vector<char> bytes;
  for (const auto& run : runs_in_flight_) {
    const std::string_view elements = run->elements();
    bytes.insert(bytes.end(), elements.begin(), elements.end());
    bytes.insert(bytes.end(), run->separator.begin(), run->separator.end());
  }
  const auto& failed = *runs_in_flight_.front();
  no_runs_before_ = failed.offset + static_cast<int64_t>(failed.elements_bytes + failed.separator.size());
  bytes.insert(bytes.end(), data() + begin_, data() + end_);
  base_offset_ = failed.offset;
  capacity_ = std::max(capacity_, bytes.size());
  end_ = bytes.size();
  begin_ = 0;
  runs_in_flight_.clear();
  buffer_ = std::make_shared<char[]>(capacity_ + kSplitterPadding);  // zeroed
  std::memcpy(data(), bytes.data(), bytes.size());
}

StatusOr<bool> TraceJsonSplitter::TryHandOutRun() {
  // Refilled when less than a run and a quarter is left: the tail that moves to a
  // new buffer then is short (runs in flight keep the old one).
  if (end_ - begin_ < run_bytes_ + run_bytes_ / 4 + kSplitterPadding && !eof_ && (begin_ > 0 || end_ < capacity_))
    RETURN_IF_ERROR(Fill());
  if (begin_ >= end_ || data()[begin_] != '{' || end_ - begin_ <= run_bytes_ + kSplitterPadding) return false;
  // The first "}" + ',' + "{" (with any whitespace) past run_bytes_: where a run of
  // elements probably ends. Newlines never occur inside JSON strings, but braces and
  // commas may, so this is checked by reading the run (EventRun). The run's padding
  // must lie before end_, where the next Fill writes.
  const char* const base = data();
  const char* p = base + begin_ + run_bytes_;
  const char* const limit = base + end_ - kSplitterPadding;
  while (p < limit) {
    p = static_cast<const char*>(std::memchr(p, '}', static_cast<size_t>(limit - p)));
    if (p == nullptr) return false;
    const char* q = p + 1;
    while (q < limit && IsSpace(*q)) ++q;
    if (q >= limit) return false;
    if (*q != ',') {
      ++p;
      continue;
    }
    ++q;
    while (q < limit && IsSpace(*q)) ++q;
    if (q >= limit) return false;
    if (*q != '{') {
      ++p;
      continue;
    }
    auto run = std::make_shared<EventRun>();
    run->index = next_run_index_++;
    run->offset = Offset();
    run->buffer = buffer_;
    run->begin = base + begin_;
    run->elements_bytes = static_cast<size_t>(p + 1 - (base + begin_));
    run->separator.assign(p + 1, q);
    begin_ = static_cast<size_t>(q - base);
    runs_in_flight_.push_back(run);
    ASSIGN_OR_RETURN(RunProgress progress, run_handler_->Submit(std::move(run)));
    RETURN_IF_ERROR(Apply(progress));
    return true;
  }
  return false;
}

Status TraceJsonSplitter::ReadArray(const EventCallback& on_event, SplitOutcome& outcome) {
  ++begin_;  // '['
  bool expect_element = true;
  bool first = true;
  while (true) {
    if (run_handler_ != nullptr && expect_element && Offset() >= no_runs_before_) {
      ASSIGN_OR_RETURN(int next, PeekNonSpace());
      if (next == '{') {
        ASSIGN_OR_RETURN(bool handed_out, TryHandOutRun());
        if (handed_out) {
          first = false;
          continue;
        }
      }
    }
    // Everything below is read here, in order after the runs handed out.
    if (!runs_in_flight_.empty()) {
      RETURN_IF_ERROR(DrainRuns());
      if (Offset() < no_runs_before_) expect_element = true;  // rewound to the start of a run
      continue;
    }
    ASSIGN_OR_RETURN(int c, PeekNonSpace());
    if (c < 0) {
      outcome.truncated = true;
      outcome.truncation_note = fmt::format(
          "the traceEvents array is not closed: the file ends at byte {} after {} complete "
          "events (a profiler that did not finish, e.g. a crashed job)",
          Offset(), outcome.events + run_events_);
      return Status::Ok();
    }
    if (c == ']' && (first || !expect_element)) {
      ++begin_;
      return Status::Ok();
    }
    if (!expect_element) {
      if (c != ',') return Malformed(fmt::format("expected ',' or ']' in traceEvents, found {}", Printable(c)));
      ++begin_;
      expect_element = true;
      continue;
    }
    if (c == ',' || c == ']') return Malformed(fmt::format("expected an event, found {}", Printable(c)));
    size_t length = 0;
    ASSIGN_OR_RETURN(ScanResult scan, ScanValue(&length));
    if (scan == ScanResult::kMalformed) return Malformed("unbalanced brackets in an event");
    if (scan == ScanResult::kNeedMore) {
      outcome.truncated = true;
      outcome.truncation_note = fmt::format(
          "the file ends inside an event at byte {} ({} bytes of that event dropped) after {} "
          "complete events; the traceEvents array is not closed (a profiler that did not "
          "finish, e.g. a crashed job)",
          Offset(), length, outcome.events + run_events_);
      begin_ = end_;
      return Status::Ok();
    }
    const int64_t offset = Offset();
    RETURN_IF_ERROR(on_event(std::string_view(data() + begin_, length), offset));
    ++outcome.events;
    begin_ += length;
    expect_element = false;
    first = false;
  }
}

StatusOr<SplitOutcome> TraceJsonSplitter::Run(const MemberCallback& on_member,
                                              const EventCallback& on_event) {
  SplitOutcome outcome;
  RETURN_IF_ERROR(Fill());
  ASSIGN_OR_RETURN(int first, PeekNonSpace());
  if (first < 0) {
    if (!read_error_.ok()) return read_error_;
    return DataLossError(source_.name() + ": the file is empty");
  }
  auto finish = [&]() -> StatusOr<SplitOutcome> {
    RETURN_IF_ERROR(DrainRuns());  // an error return leaves runs behind; a normal end has none
    outcome.events += run_events_;
    run_events_ = 0;
    outcome.bytes = base_offset_ + static_cast<int64_t>(end_);
    if (!read_error_.ok()) {
      outcome.truncated = true;
      outcome.truncation_note = read_error_.message() +
                                (outcome.truncation_note.empty() ? "" : "; " + outcome.truncation_note);
    }
    return outcome;
  };
  // After the closing bracket only whitespace belongs to the trace: anything else
  // (a second trace appended, log text, garbage) is counted, never read as events.
  auto closed = [&]() -> StatusOr<SplitOutcome> {
    ASSIGN_OR_RETURN(int next, PeekNonSpace());
    if (next >= 0) {
      outcome.trailing_offset = Offset();
      while (true) {
        outcome.trailing_bytes += static_cast<int64_t>(end_ - begin_);
        begin_ = end_;
        if (eof_) break;
        RETURN_IF_ERROR(Fill());
      }
    }
    return finish();
  };
  if (first == '[') {  // the bare-array form of the Chrome trace format
    outcome.saw_trace_events = true;
    RETURN_IF_ERROR(ReadArray(on_event, outcome));
    if (!outcome.truncated) return closed();
    return finish();
  }
  if (first != '{') {
    return UnimplementedError(fmt::format(
        "{}: not a JSON trace: it starts with {} where a Chrome/Kineto trace starts with '{{'",
        source_.name(), Printable(first)));
  }
  ++begin_;
  bool expect_member = true;
  bool first_member = true;
  while (true) {
    ASSIGN_OR_RETURN(int c, PeekNonSpace());
    if (c < 0) {
      outcome.truncated = true;
      if (outcome.truncation_note.empty()) {
        outcome.truncation_note = fmt::format(
            "the file ends at byte {} before the closing '}}'{}", Offset(),
            outcome.saw_trace_events ? " (members after traceEvents, such as baseTimeNanoseconds, may be lost)"
                                     : " and before any traceEvents");
      }
      return finish();
    }
    if (c == '}' && (first_member || !expect_member)) {
      ++begin_;
      return closed();
    }
    if (!expect_member) {
      if (c != ',') return Malformed(fmt::format("expected ',' or '}}' between top-level members, found {}", Printable(c)));
      ++begin_;
      expect_member = true;
      continue;
    }
    if (c != '"') return Malformed(fmt::format("expected a member name, found {}", Printable(c)));
    size_t key_length = 0;
    ASSIGN_OR_RETURN(ScanResult key_scan, ScanValue(&key_length));
    if (key_scan != ScanResult::kComplete) {
      outcome.truncated = true;
      outcome.truncation_note = fmt::format("the file ends inside a member name at byte {}", Offset());
      return finish();
    }
    const std::string key(data() + begin_ + 1, key_length - 2);
    begin_ += key_length;
    ASSIGN_OR_RETURN(int colon, PeekNonSpace());
    if (colon != ':') {
      if (colon < 0) continue;  // reported as truncation on the next pass
      return Malformed(fmt::format("expected ':' after member \"{}\", found {}", key, Printable(colon)));
    }
    ++begin_;
    ASSIGN_OR_RETURN(int value_start, PeekNonSpace());
    if (value_start < 0) continue;
    if (key == "traceEvents") {
      if (value_start != '[') return Malformed("traceEvents is not an array");
      outcome.saw_trace_events = true;
      RETURN_IF_ERROR(ReadArray(on_event, outcome));
      if (outcome.truncated) return finish();
    } else {
      size_t length = 0;
      ASSIGN_OR_RETURN(ScanResult scan, ScanValue(&length));
      if (scan == ScanResult::kMalformed) return Malformed(fmt::format("unbalanced brackets in member \"{}\"", key));
      if (scan == ScanResult::kNeedMore) {
        outcome.truncated = true;
        outcome.truncation_note = fmt::format("the file ends inside member \"{}\" at byte {}", key, Offset());
        return finish();
      }
      RETURN_IF_ERROR(on_member(key, std::string_view(data() + begin_, length)));
      begin_ += length;
    }
    expect_member = false;
    first_member = false;
  }
}

}  // namespace gputriage
