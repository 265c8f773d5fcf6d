#include "src/sources/metrics/terminal_screen.h"

#include <algorithm>
#include <cstdlib>

namespace gputriage {

void TerminalScreen::Feed(std::string_view bytes) {
  for (const char c : bytes) {
    switch (state_) {
      case State::kText:
        if (c == '\x1b') state_ = State::kEscape;
        else if (static_cast<unsigned char>(c) < 0x20 || c == '\x7f') Control(c);
        else Text(c);
        break;
      case State::kEscape:
        params_.clear();
        if (c == '[') state_ = State::kCsi;
        else if (c == ']' || c == 'P' || c == '_' || c == '^') state_ = State::kString;  // OSC, DCS...: to ST/BEL
        else if (c == '(' || c == ')' || c == '*' || c == '+' || c == '#' || c == '%') state_ = State::kOneMore;
        else state_ = State::kText;  // ESC 7/8, =, >, M ...: nothing the text depends on
        break;
      case State::kOneMore:  // the character set named after ESC ( and the like
        state_ = State::kText;
        break;
      case State::kCsi:
        if (c >= 0x40 && c <= 0x7e) {
          Csi(c);
          state_ = State::kText;
        } else if (params_.size() < 64) {
          params_ += c;
        }
        break;
      case State::kString:
        if (c == '\x07') state_ = State::kText;
        else if (c == '\x1b') state_ = State::kStringEscape;
        break;
      case State::kStringEscape:
        state_ = c == '\\' ? State::kText : State::kString;
        break;
    }
  }
}

void TerminalScreen::Text(char c) {
  if (col_ >= kCols) return;
  std::string& line = grid_[static_cast<size_t>(row_)];
  if (line.size() <= static_cast<size_t>(col_)) line.resize(static_cast<size_t>(col_) + 1, ' ');
  line[static_cast<size_t>(col_++)] = c;
  drawn_ = true;
}

void TerminalScreen::Control(char c) {
  if (c == '\r') {
    col_ = 0;
  } else if (c == '\n') {
    if (row_ + 1 < kRows) {
      ++row_;
    } else {  // the bottom: the top row scrolls off, as printed
      sink_({grid_.front()});
      grid_.erase(grid_.begin());
      grid_.emplace_back();
    }
  } else if (c == '\b') {
    col_ = std::max(0, col_ - 1);
  } else if (c == '\t') {
    col_ = std::min(kCols - 1, (col_ / 8 + 1) * 8);
  }
}

/// The i-th ';'-separated number of the sequence, or `fallback` where absent or 0.
int TerminalScreen::Param(size_t i, int fallback) const {
  size_t start = 0;
  for (size_t k = 0; k < i; ++k) {
    start = params_.find(';', start);
    if (start == std::string::npos) return fallback;
    ++start;
  }
  const int v = std::atoi(params_.c_str() + start);
  return v > 0 ? std::min(v, 100000) : fallback;
}

void TerminalScreen::MoveTo(int row, int col) {
  row = std::clamp(row, 0, kRows - 1);
  // Back to the top after drawing below it: the program starts its next frame.
  if (row == 0 && row_ > 0 && drawn_) EmitFrame();
  row_ = row;
  col_ = std::clamp(col, 0, kCols - 1);
}

void TerminalScreen::EraseLine(int mode) {
  std::string& line = grid_[static_cast<size_t>(row_)];
  if (mode == 0 && line.size() > static_cast<size_t>(col_)) line.resize(static_cast<size_t>(col_));
  else if (mode == 1) std::fill(line.begin(), line.begin() + std::min(line.size(), static_cast<size_t>(col_) + 1), ' ');
  else if (mode == 2) line.clear();
}

void TerminalScreen::EraseScreen(int mode) {
  if (mode == 2 || mode == 3) {
    EmitFrame();
    for (auto& line : grid_) line.clear();
    return;
  }
  EraseLine(mode);
  const auto r = static_cast<size_t>(row_);
  if (mode == 0) for (size_t i = r + 1; i < grid_.size(); ++i) grid_[i].clear();
  else if (mode == 1) for (size_t i = 0; i < r; ++i) grid_[i].clear();
}

void TerminalScreen::Csi(char final) {
  if (!params_.empty() && (params_[0] == '?' || params_[0] == '>' || params_[0] == '=')) {
    // Private modes: the alternate screen (1049/47/1047) starts clean.
    if ((final == 'h' || final == 'l') && (params_ == "?1049" || params_ == "?47" || params_ == "?1047"))
      EraseScreen(2);
    return;
  }
  switch (final) {
    case 'H': case 'f': MoveTo(Param(0, 1) - 1, Param(1, 1) - 1); break;
    case 'd': MoveTo(Param(0, 1) - 1, col_); break;
    case 'G': case '`': MoveTo(row_, Param(0, 1) - 1); break;
    case 'A': MoveTo(row_ - Param(0, 1), col_); break;
    case 'B': case 'e': MoveTo(row_ + Param(0, 1), col_); break;
    case 'C': case 'a': MoveTo(row_, col_ + Param(0, 1)); break;
    case 'D': MoveTo(row_, col_ - Param(0, 1)); break;
    case 'E': MoveTo(row_ + Param(0, 1), 0); break;
    case 'F': MoveTo(row_ - Param(0, 1), 0); break;
    case 'K': EraseLine(std::atoi(params_.c_str())); break;
    case 'J': EraseScreen(std::atoi(params_.c_str())); break;
    case 'X': {  // erase characters: blanks from the cursor
      std::string& line = grid_[static_cast<size_t>(row_)];
      for (int i = col_; i < col_ + Param(0, 1) && static_cast<size_t>(i) < line.size(); ++i) line[static_cast<size_t>(i)] = ' ';
      break;
    }
    default: break;  // colours (m), scroll regions (r), modes: the text is unchanged
  }
}

void TerminalScreen::EmitFrame() {
  if (!drawn_) return;
  drawn_ = false;
  size_t last = grid_.size();
  while (last > 0 && grid_[last - 1].find_first_not_of(' ') == std::string::npos) --last;
  std::vector<std::string> rows(grid_.begin(), grid_.begin() + static_cast<std::ptrdiff_t>(last));
  for (auto& r : rows) r.erase(r.find_last_not_of(' ') + 1);
  sink_(rows);
}

}  // namespace gputriage
