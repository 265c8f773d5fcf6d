// Decompression of the compressed inputs users have: gzip (the PyTorch profiler's
// `.json.gz`, through ISA-L's igzip, which inflates several times faster than zlib)
// and zstd (`.json.zst`, what teams compress large traces with). The only place
// ISA-L and libzstd are used.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace gputriage {

enum class Compression { kNone, kGzip, kZstd };
const char* CompressionName(Compression c);

/// What the first bytes of a file say (gzip 1f 8b, zstd 28 b5 2f fd).
Compression DetectCompression(const unsigned char* head, size_t size);

/// Bytes needed to tell every supported format apart.
constexpr size_t kCompressionMagicBytes = 4;

/// One streaming decompressor. Decode() consumes input and produces output until
/// either runs out; a finished stream (gzip member, zstd frame) is reported so the
/// caller can tell a complete file from a cut one, and the next member or frame
/// in the same input is decoded by the following calls.
class StreamDecoder {
 public:
  struct Step {
    size_t consumed = 0;      // input bytes used
    size_t produced = 0;      // output bytes written
    bool stream_end = false;  // a member/frame ended exactly at `consumed`
    bool error = false;       // corrupt data; `error_text` says what
    std::string error_text;
  };
  virtual ~StreamDecoder() = default;
  virtual Step Decode(const unsigned char* in, size_t in_size, unsigned char* out, size_t out_size) = 0;
  /// Made ready for the next member or frame after stream_end.
  virtual void Reset() = 0;
  /// The library named in messages: "igzip", "zstd".
  virtual const char* library() const = 0;
};

/// A decoder for `c` (not kNone); nullptr when it cannot be set up.
std::unique_ptr<StreamDecoder> MakeStreamDecoder(Compression c);

}  // namespace gputriage
