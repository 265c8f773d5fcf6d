// A scratch file for data that does not fit the memory budget: created unlinked
// in $TMPDIR (or /tmp), so it disappears with the process whatever happens, and
// written once, read back many times. The bytes live in the page cache, not in the
// process: re-reading a spilled run costs a copy, not a parse.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gputriage/status.h"

namespace gputriage {

class SpillFile {
 public:
  SpillFile() = default;
  ~SpillFile();
  SpillFile(const SpillFile&) = delete;
  SpillFile& operator=(const SpillFile&) = delete;
  SpillFile(SpillFile&& other) noexcept;
  SpillFile& operator=(SpillFile&& other) noexcept;

  /// Opens a new, already unlinked file in `directory` (empty: $TMPDIR, else /tmp).
  static StatusOr<SpillFile> Create(const std::string& directory = "");

  /// Appends n bytes; returns the offset they start at.
  StatusOr<int64_t> Append(const void* data, size_t n);
  /// Reads exactly n bytes at `offset` (they must have been appended).
  Status ReadAt(int64_t offset, void* data, size_t n) const;

  int64_t size() const { return size_; }

 private:
  int fd_ = -1;
  int64_t size_ = 0;
  std::string directory_;
};

}  // namespace gputriage
