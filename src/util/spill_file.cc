#include "src/util/spill_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace gputriage {

SpillFile::~SpillFile() {
  if (fd_ >= 0) ::close(fd_);
}

SpillFile::SpillFile(SpillFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(std::exchange(other.size_, 0)), directory_(std::move(other.directory_)) {}

SpillFile& SpillFile::operator=(SpillFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = std::exchange(other.size_, 0);
    directory_ = std::move(other.directory_);
  }
  return *this;
}

StatusOr<SpillFile> SpillFile::Create(const std::string& directory) {
  std::string dir = directory;
  if (dir.empty()) {
    const char* env = std::getenv("TMPDIR");
    dir = env != nullptr && *env != '\0' ? env : "/tmp";
  }
  SpillFile file;
  file.directory_ = dir;
#ifdef O_TMPFILE
  file.fd_ = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
  if (file.fd_ < 0) {  // filesystems without O_TMPFILE: create, then unlink at once
    std::string path = dir + "/gputriage-spill-XXXXXX";
    file.fd_ = ::mkostemp(path.data(), O_CLOEXEC);
    if (file.fd_ >= 0) ::unlink(path.c_str());
  }
  if (file.fd_ < 0)
    return IoError(fmt::format("cannot create a scratch file in {} (set TMPDIR to a writable directory): {}", dir,
                               std::strerror(errno)));
  return file;
}

StatusOr<int64_t> SpillFile::Append(const void* data, size_t n) {
  const int64_t at = size_;
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  while (done < n) {
    const ssize_t w = ::pwrite(fd_, p + done, n - done, static_cast<off_t>(at + static_cast<int64_t>(done)));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      return IoError(fmt::format("writing {} bytes to a scratch file in {} failed (disk full? set TMPDIR): {}", n,
                                 directory_, w < 0 ? std::strerror(errno) : "no progress"));
    done += static_cast<size_t>(w);
  }
  size_ += static_cast<int64_t>(n);
  return at;
}

Status SpillFile::ReadAt(int64_t offset, void* data, size_t n) const {
  if (offset < 0 || offset + static_cast<int64_t>(n) > size_)
    return InternalError(fmt::format("scratch file read of {} bytes at {} beyond its {} bytes", n, offset, size_));
  char* p = static_cast<char*>(data);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + static_cast<int64_t>(done)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return IoError(fmt::format("reading a scratch file in {} failed: {}", directory_,
                                 r < 0 ? std::strerror(errno) : "unexpected end"));
    done += static_cast<size_t>(r);
  }
  return Status::Ok();
}

}  // namespace gputriage
