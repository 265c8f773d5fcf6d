// Streams a text source line by line with line numbers, for the line-oriented
// metric logs. Memory is one buffer; a line longer than the limit is an error
// that names the file and line rather than an unbounded allocation.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "gputriage/status.h"
#include "src/util/byte_source.h"

namespace gputriage {

class LineReader {
 public:
  static constexpr size_t kMaxLineBytes = 1 << 20;

  explicit LineReader(std::unique_ptr<ByteSource> source);

  /// The next line without its "\n" / "\r\n". Returns false at the end of input.
  /// A read error or an over-long line is reported through `status()`.
  bool Next(std::string_view& line);
  const Status& status() const { return status_; }
  int64_t line_number() const { return line_number_; }
  int64_t bytes_consumed() const { return consumed_; }
  /// The input's last line had no newline: text tools end every line, so the
  /// file was probably cut while it was written (the line was returned as is).
  bool last_line_unterminated() const { return last_line_unterminated_; }
  const std::string& name() const { return source_->name(); }

 private:
  bool Fill();

  std::unique_ptr<ByteSource> source_;
  std::string buffer_;
  size_t begin_ = 0;
  size_t end_ = 0;
  bool eof_ = false;
  int64_t line_number_ = 0;
  int64_t consumed_ = 0;
  bool last_line_unterminated_ = false;
  Status status_;
};

}  // namespace gputriage
