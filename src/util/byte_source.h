// Streaming reads of a file that may be compressed (gzip or zstd, detected from its
// first bytes; decoding in stream_decoder.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "gputriage/status.h"

namespace gputriage {

/// Reads bytes sequentially from a source. Implementations decide compression.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  /// Reads up to `capacity` bytes into `out`. Returns the count; 0 means end of data.
  /// A corrupt or truncated compressed stream is a kDataLoss error; bytes decoded
  /// before the damage were already returned by earlier calls.
  virtual StatusOr<size_t> Read(char* out, size_t capacity) = 0;
  /// A name for messages (the file path).
  virtual const std::string& name() const = 0;
  /// True when the source is compressed (gzip or zstd).
  virtual bool compressed() const = 0;
};

/// The path that names standard input.
inline constexpr const char* kStdinPath = "-";

/// Opens `path` ("-" is standard input) and reads it once, front to back, so pipes,
/// FIFOs and process substitutions work as files do. gzip is detected by its magic
/// bytes (gzip or zstd), not by the file name; the text is then decoded to UTF-8: a UTF-8
/// byte-order mark is dropped, UTF-16 (with a BOM, or little-endian ASCII text
/// without one, as Windows PowerShell redirects write) is transcoded.
StatusOr<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path);

/// Reads up to `bytes` from the front of `source` (fewer at its end) and replaces
/// `source` with one that serves those bytes again before the rest: a format can
/// be detected from the head of a pipe without losing it. A read error with
/// nothing read is returned; one after some bytes ends the head there and is met
/// again by the reader.
StatusOr<std::string> PeekHead(std::unique_ptr<ByteSource>& source, size_t bytes);

/// Called as files are read: the file, bytes read from it so far (on disk, i.e.
/// compressed for gzip) and its size (0 when unknown: a pipe). For a progress
/// line on a terminal; set by the CLI, unset (no calls) otherwise.
using ReadProgressHook = std::function<void(const std::string& name, int64_t read, int64_t total)>;
void SetReadProgressHook(ReadProgressHook hook);

/// A source over bytes already in memory (tests, fuzzing). Not decompressed unless
/// the bytes start with the gzip magic; decoded to UTF-8 as OpenFileSource does.
std::unique_ptr<ByteSource> MemorySource(std::string name, const char* data, size_t size);

}  // namespace gputriage
