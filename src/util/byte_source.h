// Streaming reads of a file that may be gzip-compressed. This is the only place
// zlib is used.
#pragma once

#include <cstddef>
#include <cstdint>
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
  /// True when the source is gzip-compressed.
  virtual bool compressed() const = 0;
};

/// Opens `path`; gzip is detected by its magic bytes, not by the file name.
StatusOr<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path);

/// A source over bytes already in memory (tests, fuzzing). Not decompressed unless
/// the bytes start with the gzip magic.
std::unique_ptr<ByteSource> MemorySource(std::string name, const char* data, size_t size);

}  // namespace gputriage
