#include "src/util/stream_decoder.h"

#include <isa-l/igzip_lib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <climits>
#include <cstring>

namespace gputriage {
namespace {

const char* IgzipErrorText(int rc) {
  switch (rc) {
    case ISAL_INVALID_BLOCK: return "invalid deflate block";
    case ISAL_INVALID_SYMBOL: return "invalid deflate symbol";
    case ISAL_INVALID_LOOKBACK: return "invalid lookback distance";
    case ISAL_INVALID_WRAPPER: return "invalid gzip header";
    case ISAL_UNSUPPORTED_METHOD: return "unsupported compression method";
    case ISAL_INCORRECT_CHECKSUM: return "incorrect checksum";
    case ISAL_NEED_DICT: return "needs a preset dictionary";
    default: return "error";
  }
}

class GzipDecoder final : public StreamDecoder {
 public:
  GzipDecoder() { Reset(); }
  const char* library() const override { return "igzip"; }
  void Reset() override {
    isal_inflate_init(&state_);
    state_.crc_flag = ISAL_GZIP;  // parse the gzip header, verify the CRC-32 trailer
  }
  Step Decode(const unsigned char* in, size_t in_size, unsigned char* out, size_t out_size) override {
    Step step;
    // ISA-L counts in 32 bits: feed it at most 1 GiB at a time.
    const auto cap = [](size_t n) { return static_cast<uint32_t>(std::min<size_t>(n, size_t{1} << 30)); };
    state_.next_in = const_cast<uint8_t*>(in);
    state_.avail_in = cap(in_size);
    state_.next_out = out;
    state_.avail_out = cap(out_size);
    const uint32_t in_before = state_.avail_in, out_before = state_.avail_out;
    const int rc = isal_inflate(&state_);
    step.consumed = in_before - state_.avail_in;
    step.produced = out_before - state_.avail_out;
    if (rc < 0 || rc == ISAL_NEED_DICT) {
      step.error = true;
      step.error_text = IgzipErrorText(rc);
      return step;
    }
    step.stream_end = state_.block_state == ISAL_BLOCK_FINISH;
    return step;
  }

 private:
  inflate_state state_;
};

class ZstdDecoder final : public StreamDecoder {
 public:
  // A frame's window is what its decoder must hold in memory. zstd's default
  // limit (2^27 = 128 MiB, what `zstd -19` and `--long=27` write) keeps memory
  // bounded; a file written with a larger --long window is refused with that said.
  static constexpr int kWindowLogMax = 27;
  ZstdDecoder() : ctx_(ZSTD_createDCtx()) {
    if (ctx_) ZSTD_DCtx_setParameter(ctx_, ZSTD_d_windowLogMax, kWindowLogMax);
  }
  ~ZstdDecoder() override { ZSTD_freeDCtx(ctx_); }
  bool ok() const { return ctx_ != nullptr; }
  const char* library() const override { return "zstd"; }
  void Reset() override {}  // a DCtx starts the next frame by itself
  Step Decode(const unsigned char* in, size_t in_size, unsigned char* out, size_t out_size) override {
    Step step;
    ZSTD_inBuffer input{in, in_size, 0};
    ZSTD_outBuffer output{out, out_size, 0};
    const size_t rc = ZSTD_decompressStream(ctx_, &output, &input);
    step.consumed = input.pos;
    step.produced = output.pos;
    if (ZSTD_isError(rc)) {
      step.error = true;
      step.error_text = ZSTD_getErrorName(rc);
      if (ZSTD_getErrorCode(rc) == ZSTD_error_frameParameter_windowTooLarge)
        step.error_text += "; the file was written with a window over 128 MiB (zstd --long=28 or more): "
                           "recompress it with --long=27 or less";
      ZSTD_DCtx_reset(ctx_, ZSTD_reset_session_only);
      return step;
    }
    step.stream_end = rc == 0;  // a frame completely decoded and flushed
    return step;
  }

 private:
  ZSTD_DCtx* ctx_;
};

}  // namespace

const char* CompressionName(Compression c) {
  switch (c) {
    case Compression::kNone: return "none";
    case Compression::kGzip: return "gzip";
    case Compression::kZstd: return "zstd";
  }
  return "none";
}

Compression DetectCompression(const unsigned char* head, size_t size) {
  if (size >= 2 && head[0] == 0x1f && head[1] == 0x8b) return Compression::kGzip;
  if (size >= 4 && head[0] == 0x28 && head[1] == 0xb5 && head[2] == 0x2f && head[3] == 0xfd) return Compression::kZstd;
  return Compression::kNone;
}

std::unique_ptr<StreamDecoder> MakeStreamDecoder(Compression c) {
  switch (c) {
    case Compression::kGzip: return std::make_unique<GzipDecoder>();
    case Compression::kZstd: {
      auto decoder = std::make_unique<ZstdDecoder>();
      if (!decoder->ok()) return nullptr;
      return decoder;
    }
    case Compression::kNone: break;
  }
  return nullptr;
}

}  // namespace gputriage
