#include "src/cli/terminal_footer.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include <fmt/format.h>

namespace gputriage::cli {
namespace {

// The job keeps at least this many rows to scroll in.
constexpr int kMinJobRows = 4;
constexpr int kDefaultRows = 24;
constexpr int kDefaultCols = 100;


/// The terminal's size; a pseudo-terminal nobody sized (script(1) without a
/// terminal above it) says 0 x 0: the classic 24 x 100 then.
void TerminalSize(int fd, int& rows, int& cols) {
  winsize size{};
  const bool known = ioctl(fd, TIOCGWINSZ, &size) == 0;
  rows = known && size.ws_row > 0 ? size.ws_row : kDefaultRows;
  cols = known && size.ws_col > 0 ? size.ws_col : kDefaultCols;
}

}  // namespace

std::unique_ptr<TerminalFooter> TerminalFooter::Open(int fd, int lines) {
  if (lines <= 0 || isatty(fd) == 0) return nullptr;
  std::unique_ptr<TerminalFooter> footer(new TerminalFooter(fd, lines));
  if (!footer->Reserve()) return nullptr;
  return footer;
}

bool TerminalFooter::Reserve() {
  int rows = 0, cols = 0;
  TerminalSize(fd_, rows, cols);
  const int height = std::min(wanted_, rows - kMinJobRows);
  if (height <= 0) return false;
  std::string out;
  if (height_ == 0) {
    // Room below the cursor for the footer: what is on the screen scrolls up
    // rather than under it. Then the region: DECSTBM homes the cursor, so it is
    // saved around it (DECSC / DECRC).
    out += std::string(static_cast<size_t>(height), '\n') + fmt::format("\033[{}A", height);
  }
  out += fmt::format("\0337\033[1;{}r\0338", rows - height);
  rows_ = rows;
  cols_ = cols;
  height_ = height;
  Write(out);
  return true;
}

void TerminalFooter::Draw(const std::vector<std::string>& lines) {
  int rows = 0, cols = 0;
  TerminalSize(fd_, rows, cols);
  if ((rows != rows_ || cols != cols_) && !Reserve()) return;
  std::fflush(stderr);  // our own buffered lines go before the footer moves the cursor
  std::string out = "\0337";
  const int top = rows_ - height_ + 1;
  for (int i = 0; i < height_; ++i) {
    out += fmt::format("\033[{};1H\033[0m", top + i);
    if (static_cast<size_t>(i) < lines.size()) out += lines[static_cast<size_t>(i)];
    out += "\033[0m\033[K";
  }
  out += "\0338";
  Write(out);
}

TerminalFooter::~TerminalFooter() {
  if (height_ == 0) return;
  // The whole screen scrolls again; the footer's rows are cleared, and the
  // cursor stays where the job's output ended.
  std::string out = fmt::format("\0337\033[r\033[{};1H\033[J\0338", rows_ - height_ + 1);
  Write(out);
}

void TerminalFooter::Write(const std::string& bytes) const {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the terminal is gone: nothing to draw on
    done += static_cast<size_t>(n);
  }
}

}  // namespace gputriage::cli
