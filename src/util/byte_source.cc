#include "src/util/byte_source.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

namespace gputriage {
namespace {

constexpr unsigned char kGzipMagic0 = 0x1f;
constexpr unsigned char kGzipMagic1 = 0x8b;
constexpr size_t kInputChunk = 1 << 18;

/// Inflates a gzip stream (possibly several members) pulled from a raw reader.
class Inflater {
 public:
  Inflater() {
    std::memset(&stream_, 0, sizeof(stream_));
    // 16 + MAX_WBITS: gzip wrapper only.
    ok_ = inflateInit2(&stream_, 16 + MAX_WBITS) == Z_OK;
  }
  ~Inflater() { inflateEnd(&stream_); }
  Inflater(const Inflater&) = delete;
  Inflater& operator=(const Inflater&) = delete;

  bool ok() const { return ok_; }
  z_stream& stream() { return stream_; }

 private:
  z_stream stream_;
  bool ok_ = false;
};

/// Base for sources that get raw bytes from somewhere and may inflate them.
class RawSourceBase : public ByteSource {
 public:
  explicit RawSourceBase(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  bool compressed() const override { return inflater_ != nullptr; }

  StatusOr<size_t> Read(char* out, size_t capacity) override {
    if (inflater_) return ReadInflated(out, capacity);
    // Plain data: the bytes read while sniffing come first.
    const size_t served = std::min(capacity, sniffed_.size());
    std::memcpy(out, sniffed_.data(), served);
    sniffed_.erase(0, served);
    if (served == capacity) return served;
    ASSIGN_OR_RETURN(size_t got, ReadRaw(out + served, capacity - served));
    return served + got;
  }

 protected:
  /// Raw bytes from the medium; 0 at end.
  virtual StatusOr<size_t> ReadRaw(char* out, size_t capacity) = 0;

  Status DetectCompression() {
    unsigned char magic[2] = {0, 0};
    ASSIGN_OR_RETURN(size_t got, ReadRaw(reinterpret_cast<char*>(magic), 2));
    if (got == 2 && magic[0] == kGzipMagic0 && magic[1] == kGzipMagic1) {
      inflater_ = std::make_unique<Inflater>();
      if (!inflater_->ok()) return InternalError("zlib inflateInit2 failed");
      input_.assign(magic, magic + got);
    } else {
      sniffed_.assign(reinterpret_cast<char*>(magic), got);
    }
    return Status::Ok();
  }

 private:
  StatusOr<size_t> ReadInflated(char* out, size_t capacity) {
    z_stream& zs = inflater_->stream();
    size_t produced = 0;
    while (produced < capacity && !finished_) {
      if (zs.avail_in == 0) {
        if (input_offset_ >= input_.size()) {
          input_.resize(kInputChunk);
          ASSIGN_OR_RETURN(size_t got, ReadRaw(input_.data(), input_.size()));
          input_.resize(got);
          input_offset_ = 0;
          if (got == 0) {
            if (stream_has_data_) {
              // Hand out what this call decoded first; report the cut on the next call.
              finished_ = true;
              pending_error_ = DataLossError(name_ + ": gzip stream ends early (truncated file); " +
                                   std::to_string(total_out_ + produced) +
                                   " bytes were decompressed before the cut");
              break;
            }
            finished_ = true;
            break;
          }
        }
        zs.next_in = reinterpret_cast<Bytef*>(input_.data() + input_offset_);
        zs.avail_in = static_cast<uInt>(input_.size() - input_offset_);
      }
      zs.next_out = reinterpret_cast<Bytef*>(out + produced);
      zs.avail_out = static_cast<uInt>(capacity - produced);
      const uInt before_in = zs.avail_in;
      const uInt before_out = zs.avail_out;
      const int rc = inflate(&zs, Z_NO_FLUSH);
      input_offset_ += before_in - zs.avail_in;
      produced += before_out - zs.avail_out;
      stream_has_data_ = true;
      if (rc == Z_STREAM_END) {
        // Concatenated gzip members are legal; skip trailing zero padding.
        stream_has_data_ = false;
        inflateReset(&zs);
        while (input_offset_ < input_.size() && input_[input_offset_] == 0) ++input_offset_;
        zs.avail_in = 0;
        continue;
      }
      if (rc == Z_BUF_ERROR && zs.avail_in == 0) continue;  // needs more input
      if (rc != Z_OK && rc != Z_BUF_ERROR) {
        finished_ = true;
        pending_error_ = DataLossError(name_ + ": corrupt gzip data after " +
                             std::to_string(total_out_ + produced) +
                             " decompressed bytes (zlib: " + (zs.msg ? zs.msg : "error") + ")");
        break;
      }
    }
    total_out_ += produced;
    if (produced == 0 && !pending_error_.ok()) {
      Status error = pending_error_;
      pending_error_ = Status::Ok();
      return error;
    }
    return produced;
  }

  std::string name_;
  std::string sniffed_;  // bytes read to detect gzip, served first when the data is plain
  std::unique_ptr<Inflater> inflater_;
  std::vector<char> input_;
  size_t input_offset_ = 0;
  bool finished_ = false;
  bool stream_has_data_ = false;
  int64_t total_out_ = 0;
  Status pending_error_;  // damage met after some bytes of a call were decoded
};

class FileSource : public RawSourceBase {
 public:
  FileSource(std::string name, FILE* file) : RawSourceBase(std::move(name)), file_(file) {}
  ~FileSource() override {
    if (file_) std::fclose(file_);
  }
  Status Init() { return DetectCompression(); }

 protected:
  StatusOr<size_t> ReadRaw(char* out, size_t capacity) override {
    const size_t got = std::fread(out, 1, capacity, file_);
    if (got < capacity && std::ferror(file_)) return IoError(name() + ": read failed: " + std::strerror(errno));
    return got;
  }

 private:
  FILE* file_;
};

class BufferSource : public RawSourceBase {
 public:
  BufferSource(std::string name, const char* data, size_t size)
      : RawSourceBase(std::move(name)), data_(data), size_(size) {}
  Status Init() { return DetectCompression(); }

 protected:
  StatusOr<size_t> ReadRaw(char* out, size_t capacity) override {
    const size_t take = std::min(capacity, size_ - offset_);
    if (take > 0) std::memcpy(out, data_ + offset_, take);
    offset_ += take;
    return take;
  }

 private:
  const char* data_;
  size_t size_;
  size_t offset_ = 0;
};

}  // namespace

StatusOr<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) {
    if (errno == ENOENT) return NotFoundError(path + ": no such file");
    return IoError(path + ": cannot open: " + std::strerror(errno));
  }
  auto source = std::make_unique<FileSource>(path, file);
  RETURN_IF_ERROR(source->Init());
  return std::unique_ptr<ByteSource>(std::move(source));
}

std::unique_ptr<ByteSource> MemorySource(std::string name, const char* data, size_t size) {
  auto source = std::make_unique<BufferSource>(std::move(name), data, size);
  (void)source->Init();  // reading memory cannot fail
  return source;
}

}  // namespace gputriage
