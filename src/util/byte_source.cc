#include "src/util/byte_source.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <mutex>
#include <vector>

#include "src/util/stream_decoder.h"

namespace gputriage {
namespace {

constexpr size_t kInputChunk = 1 << 20;

/// Base for sources that get raw bytes from somewhere and may decompress them.
class RawSourceBase : public ByteSource {
 public:
  explicit RawSourceBase(std::string name) : name_(std::move(name)) {}
  const std::string& name() const override { return name_; }
  bool compressed() const override { return decoder_ != nullptr; }

  StatusOr<size_t> Read(char* out, size_t capacity) override {
    if (decoder_) return ReadDecoded(out, capacity);
    // Plain data: the bytes read while sniffing come first.
    const size_t served = std::min(capacity, sniffed_.size());
    std::memcpy(out, sniffed_.data(), served);
    sniffed_.erase(0, served);
    if (served == capacity) return served;
    ASSIGN_OR_RETURN(size_t got, ReadRaw(out + served, capacity - served));
    return served + got;
  }

 protected:
  virtual StatusOr<size_t> ReadRaw(char* out, size_t capacity) = 0;

  Status DetectFormat() {
    unsigned char magic[kCompressionMagicBytes] = {};
    size_t got = 0;
    while (got < sizeof(magic)) {  // a pipe may hand out fewer bytes than asked
      ASSIGN_OR_RETURN(size_t n, ReadRaw(reinterpret_cast<char*>(magic) + got, sizeof(magic) - got));
      if (n == 0) break;
      got += n;
    }
    compression_ = DetectCompression(magic, got);
    if (compression_ != Compression::kNone) {
      decoder_ = MakeStreamDecoder(compression_);
      if (!decoder_) return InternalError(std::string(CompressionName(compression_)) + " decoder setup failed");
      input_.assign(magic, magic + got);
    } else {
      sniffed_.assign(reinterpret_cast<char*>(magic), got);
    }
    return Status::Ok();
  }

 private:
  StatusOr<size_t> ReadDecoded(char* out, size_t capacity) {
    const std::string format = CompressionName(compression_);
    size_t produced = 0;
    bool input_ended = false;
    while (produced < capacity && !finished_) {
      if (input_offset_ >= input_.size() && !input_ended) {
        input_.resize(kInputChunk);
        ASSIGN_OR_RETURN(size_t got, ReadRaw(input_.data(), input_.size()));
        input_.resize(got);
        input_offset_ = 0;
        input_ended = got == 0;
      }
      const auto* in = reinterpret_cast<const unsigned char*>(input_.data()) + input_offset_;
      const StreamDecoder::Step step = decoder_->Decode(in, input_.size() - input_offset_,
                                                        reinterpret_cast<unsigned char*>(out) + produced,
                                                        capacity - produced);
      input_offset_ += step.consumed;
      produced += step.produced;
      if (step.consumed > 0) stream_has_data_ = true;
      if (step.error) {
        finished_ = true;
        pending_error_ = DataLossError(fmt::format("{}: corrupt {} data after {} decompressed bytes ({}: {})", name_,
                                                   format, total_out_ + produced, decoder_->library(),
                                                   step.error_text));
        break;
      }
      if (step.stream_end) {
        // Concatenated gzip members and zstd frames are legal; so is zero padding
        // after a gzip member (tape and block-device tools write it).
        stream_has_data_ = false;
        decoder_->Reset();
        if (compression_ == Compression::kGzip)
          while (input_offset_ < input_.size() && input_[input_offset_] == 0) ++input_offset_;
        continue;
      }
      if (input_offset_ < input_.size() || step.produced > 0) {
        if (step.consumed == 0 && step.produced == 0) {  // cannot happen with a sane decoder; never spin
          finished_ = true;
          pending_error_ = DataLossError(fmt::format("{}: {} decoder made no progress after {} decompressed bytes",
                                                     name_, format, total_out_ + produced));
        }
        continue;
      }
      if (!input_ended) continue;  // the decoder wants more input
      // End of the file: a stream cut inside a member or frame is a truncated file.
      finished_ = true;
      if (stream_has_data_)
        pending_error_ = DataLossError(fmt::format("{}: {} stream ends early (truncated file); {} bytes were "
                                                   "decompressed before the cut",
                                                   name_, format, total_out_ + produced));
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
  std::string sniffed_;  // bytes read to detect compression, served first when the data is plain
  Compression compression_ = Compression::kNone;
  std::unique_ptr<StreamDecoder> decoder_;
  std::vector<char> input_;
  size_t input_offset_ = 0;
  bool finished_ = false;
  bool stream_has_data_ = false;
  int64_t total_out_ = 0;
  Status pending_error_;  // damage met after some bytes of a call were decoded
};

ReadProgressHook& ProgressHook() {
  static ReadProgressHook hook;
  return hook;
}

class FileSource : public RawSourceBase {
 public:
  FileSource(std::string name, FILE* file) : RawSourceBase(std::move(name)), file_(file) {
    struct stat st {};
    if (fstat(fileno(file_), &st) == 0 && S_ISREG(st.st_mode)) size_ = st.st_size;
  }
  ~FileSource() override {
    if (file_) std::fclose(file_);
  }
  Status Init() { return DetectFormat(); }

 protected:
  StatusOr<size_t> ReadRaw(char* out, size_t capacity) override {
    const size_t got = std::fread(out, 1, capacity, file_);
    if (got < capacity && std::ferror(file_)) return IoError(name() + ": read failed: " + std::strerror(errno));
    read_ += static_cast<int64_t>(got);
    if (ProgressHook() && read_ >= next_report_) {
      static std::mutex hook_mutex;  // files of a run are read on several threads
      std::lock_guard<std::mutex> lock(hook_mutex);
      ProgressHook()(name(), read_, size_);
      next_report_ = read_ + kProgressEveryBytes;
    }
    return got;
  }

 private:
  static constexpr int64_t kProgressEveryBytes = 8 << 20;
  FILE* file_;
  int64_t size_ = 0;
  int64_t read_ = 0;
  int64_t next_report_ = kProgressEveryBytes;
};

class BufferSource : public RawSourceBase {
 public:
  BufferSource(std::string name, const char* data, size_t size)
      : RawSourceBase(std::move(name)), data_(data), size_(size) {}
  Status Init() { return DetectFormat(); }

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

/// Serves bytes already read from the front of a source, then the rest of it.
class PrefixedSource : public ByteSource {
 public:
  PrefixedSource(std::string head, std::unique_ptr<ByteSource> rest, Status error_after_head)
      : head_(std::move(head)), rest_(std::move(rest)), error_after_head_(std::move(error_after_head)) {}
  const std::string& name() const override { return rest_->name(); }
  bool compressed() const override { return rest_->compressed(); }
  StatusOr<size_t> Read(char* out, size_t capacity) override {
    if (offset_ < head_.size()) {
      const size_t take = std::min(capacity, head_.size() - offset_);
      std::memcpy(out, head_.data() + offset_, take);
      offset_ += take;
      if (offset_ == head_.size()) std::string().swap(head_), offset_ = 0;
      return take;
    }
    if (!error_after_head_.ok()) {
      // The damage met while peeking: the reader meets it where it lies.
      Status error = std::move(error_after_head_);
      error_after_head_ = Status::Ok();
      return error;
    }
    return rest_->Read(out, capacity);
  }

 private:
  std::string head_;
  size_t offset_ = 0;
  std::unique_ptr<ByteSource> rest_;
  Status error_after_head_;
};

/// Decodes text to UTF-8: drops a UTF-8 byte-order mark and transcodes UTF-16.
/// Byte-order marks are what Windows tools write (a PowerShell `>` redirect of
/// nvidia-smi gives UTF-16LE with a BOM); readers downstream see plain UTF-8.
class TextDecoder : public ByteSource {
 public:
  enum class Encoding { kUtf8, kUtf16Le, kUtf16Be };
  explicit TextDecoder(std::unique_ptr<ByteSource> inner) : inner_(std::move(inner)) {}
  const std::string& name() const override { return inner_->name(); }
  bool compressed() const override { return inner_->compressed(); }

  /// Reads what decides the encoding. A read error is kept for the first Read
  /// after the bytes before it, where the reader meets it as it would unwrapped.
  void Init() {
    // Up to 4 bytes decide the encoding; whatever is not a BOM is data.
    char head[4];
    size_t got = 0;
    while (got < sizeof(head)) {
      auto n = inner_->Read(head + got, sizeof(head) - got);
      if (!n.ok()) {
        pending_error_ = n.status();
        break;
      }
      if (*n == 0) break;
      got += *n;
    }
    const auto byte = [&](size_t i) { return static_cast<unsigned char>(head[i]); };
    size_t skip = 0;
    if (got >= 3 && byte(0) == 0xEF && byte(1) == 0xBB && byte(2) == 0xBF) {
      skip = 3;
    } else if (got >= 2 && byte(0) == 0xFF && byte(1) == 0xFE) {
      encoding_ = Encoding::kUtf16Le, skip = 2;
    } else if (got >= 2 && byte(0) == 0xFE && byte(1) == 0xFF) {
      encoding_ = Encoding::kUtf16Be, skip = 2;
    } else if (got == 4 && byte(0) >= 0x09 && byte(0) < 0x80 && byte(1) == 0 && byte(2) >= 0x09 && byte(2) < 0x80 &&
               byte(3) == 0) {
      // UTF-16LE without a BOM: ASCII text with every second byte zero. No text
      // input of ours starts with a NUL otherwise.
      encoding_ = Encoding::kUtf16Le;
    }
    raw_.assign(head + skip, got - skip);
  }

  StatusOr<size_t> Read(char* out, size_t capacity) override {
    if (encoding_ == Encoding::kUtf8) {
      if (!raw_.empty()) {
        const size_t take = std::min(capacity, raw_.size());
        std::memcpy(out, raw_.data(), take);
        raw_.erase(0, take);
        return take;
      }
      if (!pending_error_.ok()) return TakePendingError();
      return inner_->Read(out, capacity);
    }
    if (!pending_error_.ok()) return TakePendingError();
    while (decoded_.size() - served_ == 0) {
      if (ended_) return size_t{0};
      decoded_.clear();
      served_ = 0;
      const size_t have = raw_.size();
      raw_.resize(have + kDecodeChunk);
      ASSIGN_OR_RETURN(size_t n, inner_->Read(raw_.data() + have, kDecodeChunk));
      raw_.resize(have + n);
      if (n == 0) {
        ended_ = true;
        // An odd last byte or a lone high surrogate cannot be decoded.
        if (!raw_.empty() || pending_high_ != 0) AppendUtf8(0xFFFD);
        raw_.clear();
        pending_high_ = 0;
        continue;
      }
      Transcode();
    }
    const size_t take = std::min(capacity, decoded_.size() - served_);
    std::memcpy(out, decoded_.data() + served_, take);
    served_ += take;
    return take;
  }

 private:
  static constexpr size_t kDecodeChunk = 1 << 16;

  Status TakePendingError() {
    Status error = std::move(pending_error_);
    pending_error_ = Status::Ok();
    return error;
  }

  void Transcode() {
    size_t i = 0;
    for (; i + 1 < raw_.size(); i += 2) {
      const auto lo = static_cast<unsigned char>(raw_[i]);
      const auto hi = static_cast<unsigned char>(raw_[i + 1]);
      const uint32_t unit = encoding_ == Encoding::kUtf16Le ? (hi << 8 | lo) : (lo << 8 | hi);
      if (pending_high_ != 0) {
        if (unit >= 0xDC00 && unit <= 0xDFFF) {
          AppendUtf8(0x10000 + ((pending_high_ - 0xD800) << 10) + (unit - 0xDC00));
          pending_high_ = 0;
          continue;
        }
        AppendUtf8(0xFFFD);
        pending_high_ = 0;
      }
      if (unit >= 0xD800 && unit <= 0xDBFF) {
        pending_high_ = unit;
      } else if (unit >= 0xDC00 && unit <= 0xDFFF) {
        AppendUtf8(0xFFFD);
      } else {
        AppendUtf8(unit);
      }
    }
    raw_.erase(0, i);
  }

  void AppendUtf8(uint32_t cp) {
    if (cp < 0x80) {
      decoded_.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      decoded_.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      decoded_.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      decoded_.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      decoded_.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      decoded_.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      decoded_.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      decoded_.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      decoded_.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      decoded_.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  std::unique_ptr<ByteSource> inner_;
  Encoding encoding_ = Encoding::kUtf8;
  std::string raw_;      // undecoded bytes (UTF-8: bytes read past the BOM check)
  std::string decoded_;  // UTF-8 not yet handed out
  size_t served_ = 0;
  uint32_t pending_high_ = 0;  // a high surrogate waiting for its pair
  bool ended_ = false;
  Status pending_error_;  // met while detecting the encoding
};

std::unique_ptr<ByteSource> Decoded(std::unique_ptr<ByteSource> raw) {
  auto decoder = std::make_unique<TextDecoder>(std::move(raw));
  decoder->Init();
  return decoder;
}

}  // namespace

void SetReadProgressHook(ReadProgressHook hook) { ProgressHook() = std::move(hook); }

StatusOr<std::unique_ptr<ByteSource>> OpenFileSource(const std::string& path) {
  FILE* file = nullptr;
  std::string name = path;
  if (path == kStdinPath) {
    // A terminal would wait for typing forever: say what is expected instead.
    if (isatty(STDIN_FILENO))
      return InvalidArgumentError("-: standard input is a terminal; pipe a trace or metric log into it");
    const int fd = dup(STDIN_FILENO);
    if (fd < 0 || (file = fdopen(fd, "rb")) == nullptr)
      return IoError(std::string("-: cannot read standard input: ") + std::strerror(errno));
    name = "standard input";
  } else {
    file = std::fopen(path.c_str(), "rb");
    if (!file) {
      if (errno == ENOENT) return NotFoundError(path + ": no such file");
      return IoError(path + ": cannot open: " + std::strerror(errno));
    }
  }
  auto source = std::make_unique<FileSource>(name, file);
  RETURN_IF_ERROR(source->Init());
  return Decoded(std::move(source));
}

StatusOr<std::string> PeekHead(std::unique_ptr<ByteSource>& source, size_t bytes) {
  std::string head(bytes, '\0');
  size_t got = 0;
  Status error_after_head;
  while (got < head.size()) {
    auto n = source->Read(head.data() + got, head.size() - got);
    if (!n.ok()) {
      if (got == 0) return n.status();
      error_after_head = n.status();  // a truncated gzip still shows what it is
      break;
    }
    if (*n == 0) break;
    got += *n;
  }
  head.resize(got);
  source = std::make_unique<PrefixedSource>(head, std::move(source), std::move(error_after_head));
  return head;
}

std::unique_ptr<ByteSource> MemorySource(std::string name, const char* data, size_t size) {
  auto source = std::make_unique<BufferSource>(std::move(name), data, size);
  (void)source->Init();  // reading memory cannot fail
  return Decoded(std::move(source));
}

}  // namespace gputriage
