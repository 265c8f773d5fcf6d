// `gputriage top`'s layout without a terminal: every line fits any size, the
// sparkline maps 0-100 % to its eight blocks, sorting puts unknowns last, and
// control characters in a process name cannot reach the terminal.
#include <algorithm>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "gputriage/markers.h"
#include "src/top/live_record_screen.h"
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
  // Issue 53: a reason longer than the screen goes on over the next lines, whole.
  v.source_status = "no NVIDIA driver library (NVML) could be loaded (libnvidia-ml.so.1: cannot open shared object "
                    "file: No such file or directory). Is an NVIDIA driver installed?";
  lines = RenderTopScreen(&v, TopUiState{}, 60, 12, "");
  std::string all;
  for (size_t i = 1; i < lines.size(); ++i) all += lines[i].text + " ";
  for (const char* word : {"directory).", "installed?"})
    EXPECT_NE(all.find(word), std::string::npos) << all;
}

}  // namespace
}  // namespace gputriage

// ---- record --live (src/top/live_record_screen.h) -----------------------------

namespace gputriage {
namespace {

TEST(LiveRecordScreen, ThePhaseSplitAndTheVerdictSoFar) {
  StepMarkerAnalysis m;
  m.steps = 40;
  m.step_ms_mean = 45.0;
  m.step_ms_p50 = 44.0;
  m.step_ms_p95 = 47.0;
  m.samples_per_s = 1420;
  m.phases_traced = true;
  m.phase_ms_mean[GPUTRIAGE_PHASE_DATA] = 1.0;
  m.phase_ms_mean[GPUTRIAGE_PHASE_FORWARD] = 10.0;
  m.phase_ms_mean[GPUTRIAGE_PHASE_BACKWARD] = 12.0;
  m.phase_ms_mean[GPUTRIAGE_PHASE_OPTIMIZER] = 2.0;
  m.untraced_ms_mean = 20.0;
  Finding stall;
  stall.verdict = "host_stall";
  stall.severity = Severity::kHigh;
  stall.title = "Host stall: 20.0 ms of every 45.0 ms step";
  const int width = 160;
  const auto lines = RenderLiveRecordScreen(m, {stall}, 123, 75 * kNsPerS, width);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0].style, LineStyle::kTitle);
  EXPECT_NE(lines[0].text.find("00:01:15"), std::string::npos);
  EXPECT_NE(lines[0].text.find("123 steps"), std::string::npos);
  EXPECT_NE(lines[1].text.find("step 45.0 ms"), std::string::npos);
  EXPECT_NE(lines[1].text.find("1420 samples/s"), std::string::npos);
  // The bar: width - 2 columns in proportion (1 : 10 : 12 : 2 : 20 of 45 ms), each within a column.
  const std::string& bar = lines[2].text;
  EXPECT_EQ(bar.front(), '[');
  const double columns = width - 2;
  for (auto [glyph, ms] : {std::pair{'d', 1.0}, {'f', 10.0}, {'b', 12.0}, {'o', 2.0}, {'.', 20.0}})
    EXPECT_NEAR(static_cast<double>(std::count(bar.begin(), bar.end(), glyph)), ms / 45.0 * columns, 1.0) << glyph;
  EXPECT_NE(lines[3].text.find("outside the phases 20.0"), std::string::npos);
  EXPECT_EQ(lines[4].style, LineStyle::kHigh);
  EXPECT_NE(lines[4].text.find("Host stall"), std::string::npos);
  for (const auto& line : lines) EXPECT_EQ(DisplayWidth(line.text), width) << line.text;
  // A narrow terminal cuts the lines, never wraps them.
  for (const auto& line : RenderLiveRecordScreen(m, {stall}, 123, 75 * kNsPerS, 50)) EXPECT_EQ(DisplayWidth(line.text), 50);
}

TEST(LiveRecordScreen, BeforeTheFirstStepsAndTheRedraw) {
  const auto waiting = RenderLiveRecordScreen(StepMarkerAnalysis{}, {}, 0, 0, 50);
  ASSERT_EQ(waiting.size(), 2u);
  EXPECT_NE(waiting[1].text.find("waiting for the job's first steps"), std::string::npos);
  // The first draw prints the lines; the next goes back up over them and clears
  // the lines a longer screen left below.
  EXPECT_EQ(AnsiRedraw({{"a", LineStyle::kNormal}}, 0), "\ra\033[0m\033[K\n");
  EXPECT_EQ(AnsiRedraw({{"a", LineStyle::kNormal}}, 3), "\r\033[3A\ra\033[0m\033[K\n\033[K\n\033[K\n");
  LiveStepWindow window(3);
  auto step = [](int64_t n) {
    MarkedStep s;
    s.number = n;
    return s;
  };
  window.Add({step(0), step(1), step(2), step(3)});
  EXPECT_EQ(window.Steps().size(), 3u);
  EXPECT_EQ(window.total(), 4);
  // Steps still held by the recorder come after the final ones, the window's size kept.
  auto numbers = [](const std::vector<MarkedStep>& steps) {
    std::vector<int64_t> out;
    for (const auto& s : steps) out.push_back(s.number);
    return out;
  };
  EXPECT_EQ(numbers(window.Steps({step(4)})), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(numbers(window.Steps({step(4), step(5), step(6), step(7)})), (std::vector<int64_t>{5, 6, 7}));
}

}  // namespace
}  // namespace gputriage
