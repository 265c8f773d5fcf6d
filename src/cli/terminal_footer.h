// A few lines kept at the bottom of the terminal while a recorded job writes its
// own output above them. The rows above the footer become the terminal's
// scrolling region (DECSTBM), so the job's lines scroll there and are never
// drawn over; each redraw saves the cursor, draws the footer rows and puts the
// cursor back where the job left it, in one write() (a tty write is not
// interleaved with another process's). Closing gives the whole screen back.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace gputriage::cli {

class TerminalFooter {
 public:
  /// A footer of up to `lines` rows on `fd` (a terminal); null when `fd` is not
  /// one, or too small to keep a few rows for the job.
  static std::unique_ptr<TerminalFooter> Open(int fd, int lines);
  ~TerminalFooter();
  TerminalFooter(const TerminalFooter&) = delete;
  TerminalFooter& operator=(const TerminalFooter&) = delete;

  /// Draws `lines` (already styled; each fits the width) in the footer rows,
  /// blank rows below them; re-reserves the rows when the terminal was resized.
  void Draw(const std::vector<std::string>& lines);
  int width() const { return cols_; }

 private:
  TerminalFooter(int fd, int lines) : fd_(fd), wanted_(lines) {}
  bool Reserve();  // the terminal's size now; sets the region; false when too small
  void Write(const std::string& bytes) const;

  int fd_;
  int wanted_;
  int rows_ = 0, cols_ = 0;
  int height_ = 0;  // footer rows in use
};

}  // namespace gputriage::cli
