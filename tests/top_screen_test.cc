// `gputriage top`'s layout without a terminal: every line fits any size, the
// sparkline maps 0-100 % to its eight blocks, sorting puts unknowns last, and
// control characters in a process name cannot reach the terminal.
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "src/top/top_screen.h"

namespace gputriage {
namespace {

AgentView ThreeGpus() {
  AgentView v;
  v.interval_ns = kNsPerS;
  v.window_ns = 60 * kNsPerS;
  for (int i = 0; i < 3; ++i) {
    GpuView g;
    g.label = "GPU " + std::to_string(i);
    g.name = "NVIDIA H100 80GB HBM3";
    g.uuid = "GPU-" + std::to_string(i);
    g.latest.fill(std::numeric_limits<double>::quiet_NaN());
    g.latest[static_cast<size_t>(Metric::kGpuUtil)] = i == 0 ? 50 : i == 1 ? 0 : 100;
    g.latest[static_cast<size_t>(Metric::kPowerW)] = 100.0 * (i + 1);
    for (int t = 0; t < 100; ++t) g.recent[0].push_back(t % 2 ? 100.f : 0.f);
    g.judgement.verdict = i == 1 ? "idle" : "input_bound";
    g.judgement.title = "a title";
    g.judgement.window_covered_ns = 10 * kNsPerS;
    g.processes.push_back({4242, std::string("evil\x1b[2Jname")});
    g.job.pid = 4242;
    g.job.command = "python";
    v.gpus.push_back(g);
  }
  return v;
}

TEST(TopScreen, EveryLineFitsEverySize) {
  const AgentView v = ThreeGpus();
  for (int width : {1, 10, 40, 64, 80, 109, 110, 160, 300})
    for (int height : {1, 2, 5, 14, 40, 100}) {
      TopUiState ui;
      ui.selected = 2;
      const auto lines = RenderTopScreen(&v, ui, width, height, "12:00:00");
      EXPECT_LE(static_cast<int>(lines.size()), std::max(height, 1)) << width << "x" << height;
      for (const auto& l : lines) EXPECT_EQ(DisplayWidth(l.text), width) << width << "x" << height << ": " << l.text;
      EXPECT_EQ(lines.back().text.rfind("q", 0), 0u) << "the footer is the last row";
    }
}

TEST(TopScreen, SparklineLevelsAndHistory) {
  EXPECT_EQ(Sparkline({0.f, 50.f, 100.f}, 3), "▁▅█");
  EXPECT_EQ(Sparkline({100.f}, 3), "  █");  // history not yet full: blank on the left
  EXPECT_EQ(Sparkline({0.f, std::numeric_limits<float>::quiet_NaN(), 100.f}, 3), "▁ █");
  EXPECT_EQ(Sparkline({0.f, 10.f, 20.f, 30.f}, 2), "▂▃");  // the newest at the right
  EXPECT_EQ(DisplayWidth(Sparkline(std::vector<float>(500, 40.f), 37)), 37);
}

TEST(TopScreen, SortsByAFigureWithUnknownsLast) {
  AgentView v = ThreeGpus();
  v.gpus[0].latest[static_cast<size_t>(Metric::kGpuUtil)] = std::numeric_limits<double>::quiet_NaN();
  TopUiState ui;
  ui.sort = TopSort::kUtil;
  EXPECT_EQ(SortedGpus(v, ui), (std::vector<size_t>{2, 1, 0}));
  ui.reverse = true;
  EXPECT_EQ(SortedGpus(v, ui), (std::vector<size_t>{1, 2, 0}));
  ui.sort = TopSort::kIndex;
  EXPECT_EQ(SortedGpus(v, ui), (std::vector<size_t>{2, 1, 0}));
}

TEST(TopScreen, NamesCannotSteerTheTerminal) {
  const AgentView v = ThreeGpus();
  for (const auto& l : RenderTopScreen(&v, TopUiState{}, 200, 40, ""))
    EXPECT_EQ(l.text.find('\x1b'), std::string::npos) << l.text;
}

TEST(TopScreen, NothingSampledYetAndNvmlMissing) {
  auto lines = RenderTopScreen(nullptr, TopUiState{}, 80, 10, "");
  EXPECT_NE(lines[1].text.find("starting"), std::string::npos);
  AgentView v;
  v.source_status = "libnvidia-ml.so.1: cannot open shared object file";
  lines = RenderTopScreen(&v, TopUiState{}, 80, 10, "");
  EXPECT_NE(lines[1].text.find("not sampling: libnvidia-ml.so.1"), std::string::npos);
}

}  // namespace
}  // namespace gputriage
