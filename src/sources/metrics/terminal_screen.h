// The screen a terminal recording draws: `script`, a tmux or screen log of a
// full-screen program such as `watch nvidia-smi`, which redraws in place with
// cursor moves and erases rather than printing lines. Enough of VT100/xterm is
// replayed (text, CR/LF/BS/TAB, cursor position and moves, erases, the alternate
// screen; colours and modes are passed by) to read back what the screen showed.
#ifndef GPUTRIAGE_SOURCES_METRICS_TERMINAL_SCREEN_H_
#define GPUTRIAGE_SOURCES_METRICS_TERMINAL_SCREEN_H_

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace gputriage {

class TerminalScreen {
 public:
  // Bounds on the grid a hostile recording can ask for (positions are clamped).
  static constexpr int kRows = 256;
  static constexpr int kCols = 512;
  /// Receives each frame: the screen's rows, trailing spaces cut, as it stood when
  /// the program went back to the top to draw again (or cleared the screen, or the
  /// recording ended). A row that scrolls off the top is given alone, as printed.
  using Sink = std::function<void(const std::vector<std::string>& rows)>;

  explicit TerminalScreen(Sink sink) : sink_(std::move(sink)), grid_(kRows) {}

  void Feed(std::string_view bytes);
  void Finish() { EmitFrame(); }

 private:
  enum class State { kText, kEscape, kCsi, kString, kStringEscape, kOneMore };

  void Text(char c);
  void Control(char c);
  void Csi(char final);
  int Param(size_t i, int fallback) const;
  void MoveTo(int row, int col);
  void EraseLine(int mode);
  void EraseScreen(int mode);
  void EmitFrame();

  Sink sink_;
  std::vector<std::string> grid_;
  int row_ = 0, col_ = 0;
  bool drawn_ = false;  // written to since the last frame
  State state_ = State::kText;
  std::string params_;
};

}  // namespace gputriage

#endif  // GPUTRIAGE_SOURCES_METRICS_TERMINAL_SCREEN_H_
