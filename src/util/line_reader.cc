#include "src/util/line_reader.h"

#include <algorithm>
#include <cstring>

namespace gputriage {

namespace {
constexpr size_t kInitialBuffer = 1 << 18;
constexpr size_t kMaxBuffer = (1 << 20) + LineReader::kMaxLineBytes;
}

// The buffer starts small (short inputs cost little) and doubles up to 1 MiB of
// read-ahead plus the longest allowed line.
LineReader::LineReader(std::unique_ptr<ByteSource> source) : source_(std::move(source)) {
  buffer_.resize(kInitialBuffer);
}

bool LineReader::Fill() {
  // Move the partial line to the front, then read more after it.
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (eof_) return false;
  if (end_ >= buffer_.size()) {
    if (buffer_.size() >= kMaxBuffer) return false;
    buffer_.resize(std::min(buffer_.size() * 2, kMaxBuffer));
  }
  auto n = source_->Read(buffer_.data() + end_, buffer_.size() - end_);
  if (!n.ok()) {
    status_ = n.status();
    eof_ = true;
    return false;
  }
  if (*n == 0) {
    eof_ = true;
    return false;
  }
  end_ += *n;
  return true;
}

bool LineReader::Next(std::string_view& line) {
  if (!status_.ok()) return false;
  size_t scanned = begin_;
  while (true) {
    const void* nl = std::memchr(buffer_.data() + scanned, '\n', end_ - scanned);
    if (nl != nullptr) {
      const size_t pos = static_cast<size_t>(static_cast<const char*>(nl) - buffer_.data());
      size_t stop = pos;
      if (stop > begin_ && buffer_[stop - 1] == '\r') --stop;
      line = std::string_view(buffer_.data() + begin_, stop - begin_);
      consumed_ += static_cast<int64_t>(pos + 1 - begin_);
      begin_ = pos + 1;
      ++line_number_;
      return true;
    }
    if (end_ - begin_ > kMaxLineBytes) {
      status_ = DataLossError(source_->name() + ":" + std::to_string(line_number_ + 1) + ": line longer than " +
                              std::to_string(kMaxLineBytes) + " bytes (not a metric log?)");
      return false;
    }
    const size_t pending = end_ - begin_;
    if (!Fill()) {
      if (!status_.ok()) return false;
      if (end_ > begin_) {  // last line without a newline
        size_t stop = end_;
        if (buffer_[stop - 1] == '\r') --stop;
        line = std::string_view(buffer_.data() + begin_, stop - begin_);
        consumed_ += static_cast<int64_t>(end_ - begin_);
        begin_ = end_;
        ++line_number_;
        last_line_unterminated_ = line.find_first_not_of(" \t\r") != std::string_view::npos;
        return true;
      }
      return false;
    }
    scanned = begin_ + pending;
  }
}

}  // namespace gputriage
