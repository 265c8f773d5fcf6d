#include "src/top/top_terminal.h"

#include <clocale>
#include <ctime>
#include <unistd.h>

#include <ncurses.h>

#include "src/top/top_screen.h"

namespace gputriage {
namespace {

enum ColorPair : short { kPairTitle = 1, kPairHigh, kPairModerate, kPairLow, kPairSelected };

int Attributes(LineStyle style, bool colors) {
  switch (style) {
    case LineStyle::kTitle: return colors ? COLOR_PAIR(kPairTitle) | A_BOLD : A_REVERSE;
    case LineStyle::kHeader: return A_BOLD;
    case LineStyle::kSelected: return colors ? COLOR_PAIR(kPairSelected) | A_BOLD : A_REVERSE;
    case LineStyle::kHigh: return colors ? COLOR_PAIR(kPairHigh) | A_BOLD : A_BOLD;
    case LineStyle::kModerate: return colors ? COLOR_PAIR(kPairModerate) : A_NORMAL;
    case LineStyle::kLow: return colors ? COLOR_PAIR(kPairLow) : A_NORMAL;
    case LineStyle::kDim: return A_DIM;
    case LineStyle::kNormal: return A_NORMAL;
  }
  return A_NORMAL;
}

std::string Clock() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return buf;
}

}  // namespace

Status RunTopTerminal(const Agent& agent, const TopTerminalOptions& options, const std::atomic<bool>& stop) {
  if (isatty(STDIN_FILENO) == 0 || isatty(STDOUT_FILENO) == 0)
    return InvalidArgumentError("top draws on a terminal: run it in one (or use --once for a single plain-text screen)");
  std::setlocale(LC_ALL, "");  // sparklines are UTF-8 block characters
  if (initscr() == nullptr) return InvalidArgumentError("top: the terminal could not be set up (TERM=" +
                                                        std::string(getenv("TERM") ? getenv("TERM") : "") + ")");
  cbreak();
  noecho();
  keypad(stdscr, TRUE);
  curs_set(0);
  timeout(options.refresh_ms);
  const bool colors = has_colors();
  if (colors) {
    start_color();
    use_default_colors();
    init_pair(kPairTitle, COLOR_BLACK, COLOR_CYAN);
    init_pair(kPairHigh, COLOR_RED, -1);
    init_pair(kPairModerate, COLOR_YELLOW, -1);
    init_pair(kPairLow, COLOR_GREEN, -1);
    init_pair(kPairSelected, COLOR_BLACK, COLOR_WHITE);
  }
  TopUiState ui;
  while (!stop.load()) {
    const auto view = agent.View();
    const int height = LINES, width = COLS;
    const auto lines = RenderTopScreen(view.get(), ui, width, height, Clock());
    erase();
    for (size_t row = 0; row < lines.size() && static_cast<int>(row) < height; ++row) {
      const int attr = Attributes(lines[row].style, colors);
      attron(attr);
      // The last cell of the last row would scroll the screen: one column short there.
      const std::string text = static_cast<int>(row) == height - 1 ? FitColumns(lines[row].text, width - 1) : lines[row].text;
      mvaddstr(static_cast<int>(row), 0, text.c_str());
      attroff(attr);
    }
    refresh();
    const int key = getch();
    if (key == ERR || key == KEY_RESIZE) continue;  // a tick, or a new size: draw again
    if (ui.help) {
      ui.help = false;
      continue;
    }
    const size_t gpus = view ? view->gpus.size() : 0;
    switch (key) {
      case 'q': case 'Q':
        endwin();
        return Status::Ok();
      case 's': ui.sort = static_cast<TopSort>((static_cast<int>(ui.sort) + 1) % 5); break;
      case 'r': ui.reverse = !ui.reverse; break;
      case 'j': case KEY_DOWN: if (gpus > 0 && ui.selected + 1 < gpus) ++ui.selected; break;
      case 'k': case KEY_UP: if (ui.selected > 0) --ui.selected; break;
      case KEY_HOME: case 'g': ui.selected = 0; break;
      case KEY_END: case 'G': if (gpus > 0) ui.selected = gpus - 1; break;
      case 'h': case '?': ui.help = true; break;
      default:
        if (key >= '0' && key <= '9') {
          // A digit picks that GPU by its position in the list.
          const size_t pick = static_cast<size_t>(key - '0');
          if (pick < gpus) ui.selected = pick;
        }
        break;
    }
  }
  endwin();
  return Status::Ok();
}

}  // namespace gputriage
