#include "src/sources/kineto/trace_json_splitter.h"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <fmt/format.h>

namespace gputriage {
namespace {

constexpr size_t kMaxValueBytes = size_t{1} << 30;  // one event/member above 1 GiB is corrupt

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string Printable(int c) {
  if (c >= 0x20 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
  return fmt::format("byte 0x{:02x}", c & 0xff);
}


/// First byte in [p, limit) that matters to the scanner: inside a string '"' or
/// '\\'; outside, '"' and the brackets. 16 bytes at a time where SSE2 exists
/// (every x86-64): the splitter touches every byte of the file, so this loop is
/// the importer's hot path.
const char* FindStructural(const char* p, const char* limit, bool in_string) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i open_brace = _mm_set1_epi8('{');
  const __m128i close_brace = _mm_set1_epi8('}');
  const __m128i open_bracket = _mm_set1_epi8('[');
  const __m128i close_bracket = _mm_set1_epi8(']');
  while (limit - p >= 16) {
    const __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i hits = _mm_cmpeq_epi8(chunk, quote);
    if (in_string) {
      hits = _mm_or_si128(hits, _mm_cmpeq_epi8(chunk, backslash));
    } else {
      hits = _mm_or_si128(hits, _mm_or_si128(_mm_cmpeq_epi8(chunk, open_brace), _mm_cmpeq_epi8(chunk, close_brace)));
      hits = _mm_or_si128(hits, _mm_or_si128(_mm_cmpeq_epi8(chunk, open_bracket), _mm_cmpeq_epi8(chunk, close_bracket)));
    }
    const int mask = _mm_movemask_epi8(hits);
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  for (; p < limit; ++p) {
    const char c = *p;
    if (c == '"' || (in_string ? c == '\\' : (c == '{' || c == '}' || c == '[' || c == ']'))) return p;
  }
  return limit;
}

}  // namespace

TraceJsonSplitter::TraceJsonSplitter(ByteSource& source, size_t chunk_bytes)
    : source_(source), buffer_(chunk_bytes + kSplitterPadding, '\0'), capacity_(chunk_bytes) {}

Status TraceJsonSplitter::Malformed(const std::string& what) const {
  return DataLossError(fmt::format("{}: byte {}: {}", source_.name(), Offset(), what));
}

Status TraceJsonSplitter::Fill() {
  if (eof_) return Status::Ok();
  if (begin_ > 0) {  // compact: keep the unconsumed tail at the front
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    base_offset_ += static_cast<int64_t>(begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == capacity_) {  // one value fills the whole buffer: grow
    if (capacity_ >= kMaxValueBytes) {
      return Malformed("a single JSON value is larger than 1 GiB; the file is corrupt");
    }
    capacity_ *= 2;
    buffer_.resize(capacity_ + kSplitterPadding, '\0');
  }
  auto got = source_.Read(buffer_.data() + end_, capacity_ - end_);
  if (!got.ok()) {
    // Decompression damage: keep what was decoded, treat the rest as lost.
    read_error_ = got.status();
    eof_ = true;
  } else if (*got == 0) {
    eof_ = true;
  } else {
    end_ += *got;
  }
  std::memset(buffer_.data() + end_, 0, kSplitterPadding);
  return Status::Ok();
}

StatusOr<int> TraceJsonSplitter::PeekNonSpace() {
  while (true) {
    while (begin_ < end_ && IsSpace(buffer_[begin_])) ++begin_;
    if (begin_ < end_) return static_cast<unsigned char>(buffer_[begin_]);
    if (eof_) return -1;
    RETURN_IF_ERROR(Fill());
  }
}

StatusOr<TraceJsonSplitter::ScanResult> TraceJsonSplitter::ScanValue(size_t* length) {
  // State survives refills: offsets are relative to the value's first byte.
  size_t offset = 0;
  int depth = 0;
  bool in_string = false;
  bool scalar = false;
  bool started = false;
  while (true) {
    const char* start = buffer_.data() + begin_;
    const char* p = start + offset;
    const char* const limit = buffer_.data() + end_;
    if (!started && p < limit) {
      started = true;
      const char c = *p;
      if (c == '"') {
        in_string = true;
        ++p;
      } else if (c != '{' && c != '[') {
        scalar = true;
      }
    }
    if (scalar) {
      while (p < limit) {
        const char c = *p;
        if (c == ',' || c == '}' || c == ']' || IsSpace(c)) {
          *length = static_cast<size_t>(p - start);
          return ScanResult::kComplete;
        }
        ++p;
      }
    } else {
      while (p < limit) {
        p = FindStructural(p, limit, in_string);
        if (p >= limit) break;
        const char c = *p;
        if (in_string) {
          if (c == '\\') {  // skip the escaped character (may lie past the buffer end)
            p += 2;
            continue;
          }
          in_string = false;  // closing quote
          ++p;
          if (depth == 0) {
            *length = static_cast<size_t>(p - start);
            return ScanResult::kComplete;
          }
          continue;
        }
        ++p;
        switch (c) {
          case '"': in_string = true; break;
          case '{':
          case '[': ++depth; break;
          default:  // '}' or ']'
            if (--depth == 0) {
              *length = static_cast<size_t>(p - start);
              return ScanResult::kComplete;
            }
            if (depth < 0) return ScanResult::kMalformed;
            break;
        }
      }
    }
    offset = static_cast<size_t>(p - start);
    if (eof_) {
      if (scalar && offset > 0) {  // a bare scalar may end the data
        *length = std::min(offset, end_ - begin_);
        return ScanResult::kComplete;
      }
      *length = std::min(offset, end_ - begin_);
      return ScanResult::kNeedMore;
    }
    RETURN_IF_ERROR(Fill());
  }
}

Status TraceJsonSplitter::ReadArray(const EventCallback& on_event, SplitOutcome& outcome) {
  ++begin_;  // '['
  bool expect_element = true;
  bool first = true;
  while (true) {
    ASSIGN_OR_RETURN(int c, PeekNonSpace());
    if (c < 0) {
      outcome.truncated = true;
      outcome.truncation_note = fmt::format(
          "the traceEvents array is not closed: the file ends at byte {} after {} complete "
          "events (a profiler that did not finish, e.g. a crashed job)",
          Offset(), outcome.events);
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
          Offset(), length, outcome.events);
      begin_ = end_;
      return Status::Ok();
    }
    const int64_t offset = Offset();
    RETURN_IF_ERROR(on_event(std::string_view(buffer_.data() + begin_, length), offset));
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
    outcome.bytes = base_offset_ + static_cast<int64_t>(end_);
    if (!read_error_.ok()) {
      outcome.truncated = true;
      outcome.truncation_note = read_error_.message() +
                                (outcome.truncation_note.empty() ? "" : "; " + outcome.truncation_note);
    }
    return outcome;
  };
  if (first == '[') {  // the bare-array form of the Chrome trace format
    outcome.saw_trace_events = true;
    RETURN_IF_ERROR(ReadArray(on_event, outcome));
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
      return finish();
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
    const std::string key(buffer_.data() + begin_ + 1, key_length - 2);
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
      RETURN_IF_ERROR(on_member(key, std::string_view(buffer_.data() + begin_, length)));
      begin_ += length;
    }
    expect_member = false;
    first_member = false;
  }
}

}  // namespace gputriage
