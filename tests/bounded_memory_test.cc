// A trace read past its memory budget keeps its events in time-ordered streams,
// partly in scratch files, and every analysis reads them there (trace_events.h,
// joins.h): the diagnosis must be the same JSON, byte for byte, as when the whole
// trace is in memory. Checked on every bundled trace and run with budgets small
// enough that every stream, join and replay spills through many runs.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "gputriage/diagnosis.h"
#include "gputriage/import.h"
#include "gputriage/report.h"
#include "src/model/event_streams.h"
#include "src/report/chart_data.h"

namespace gputriage {
namespace {

struct Diagnosed {
  std::string json;
  int spilled_recordings = 0;
};

Diagnosed DiagnoseWithBudget(const std::string& path, size_t budget) {
  ImportOptions options;
  options.memory_budget_bytes = budget;
  auto run = ImportRun({path}, options);
  Diagnosed out;
  if (!run.ok()) {
    out.json = "error: " + run.status().ToString();
    return out;
  }
  for (const auto& r : run->recordings) out.spilled_recordings += r.streams != nullptr ? 1 : 0;
  const Diagnosis d = Diagnose(*run);
  for (const auto& r : d.recordings) EXPECT_EQ(r.error, "") << path;
  out.json = RenderJson(*run, d);
  return out;
}

/// Every trace file and Nsight Systems export, and every directory of rank traces (one run).
std::vector<std::string> BundledInputs() {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(std::string(GPUTRIAGE_TEST_DATA_DIR) + "/traces")) {
    const std::string p = e.path().string();
    if (e.is_regular_file() && p.ends_with(".sqlite")) {  // Nsight Systems exports
      out.insert(p);
      continue;
    }
    if (!e.is_regular_file() || p.find(".json") == std::string::npos || p.ends_with("run.json")) continue;
    // A recorded run's rank traces are diagnosed together, as the run they are.
    if (p.find("/recorded/") != std::string::npos) out.insert(e.path().parent_path().string());
    else out.insert(p);
  }
  return {out.begin(), out.end()};
}

TEST(BoundedMemory, EveryBundledTraceDiagnosesTheSameFromSpilledStreams) {
  int inputs = 0, spilled = 0, nsys_spilled = 0;
  for (const auto& path : BundledInputs()) {
    const Diagnosed in_memory = DiagnoseWithBudget(path, size_t{1} << 30);
    ASSERT_EQ(in_memory.spilled_recordings, 0) << path;
    // 64 KiB: the events spill into runs of a few hundred records each, and every
    // join and replay of the analysis spills too (4 KiB each).
    const Diagnosed spilled_run = DiagnoseWithBudget(path, size_t{64} << 10);
    EXPECT_EQ(spilled_run.json, in_memory.json) << path;
    spilled += spilled_run.spilled_recordings > 0 ? 1 : 0;
    nsys_spilled += spilled_run.spilled_recordings > 0 && path.ends_with(".sqlite") ? 1 : 0;
    ++inputs;
  }
  EXPECT_GE(nsys_spilled, 2) << "Nsight Systems exports must go through the spilled path too";
  EXPECT_GE(inputs, 25);
  EXPECT_GE(spilled, 15) << "too few bundled traces exceed 64 KiB of events to test the spilled path";
}

TEST(BoundedMemory, RanksSummarisedAsTheyAreReadDiagnoseTheSame) {
  // The ranks of a run read a few at a time are analysed as they are read and
  // only their summaries kept (ImportOptions::on_trace_read): the JSON and the
  // charts must be those of the run held whole, on every bundled run of ranks and
  // on traces named one by one (ranks numbered after they are read).
  std::vector<std::vector<std::string>> runs;
  for (const auto& path : BundledInputs())
    if (std::filesystem::is_directory(path)) runs.push_back({path});
  ASSERT_GE(runs.size(), 8u);
  const std::string hta = std::string(GPUTRIAGE_TEST_DATA_DIR) + "/traces/hta/";
  runs.push_back({hta + "trace_diff_control_a100.json.gz", hta + "alexnet_a100_benchmark.json.gz"});
  for (const auto& paths : runs) {
    auto whole = ImportRun(paths);
    ImportOptions options;
    options.on_trace_read = AnalyzeAndDropEvents;
    auto summarised = ImportRun(paths, options);
    ASSERT_TRUE(whole.ok() && summarised.ok()) << paths.front();
    for (const auto& rec : summarised->recordings) {
      EXPECT_NE(rec.analysis, nullptr) << rec.source_path;
      EXPECT_TRUE(rec.kernels.empty() && rec.cpu_spans.empty() && rec.streams == nullptr) << rec.source_path;
    }
    const Diagnosis a = Diagnose(*whole), b = Diagnose(*summarised);
    EXPECT_EQ(RenderJson(*summarised, b), RenderJson(*whole, a)) << paths.front();
    EXPECT_EQ(RenderChartJson(*summarised, b), RenderChartJson(*whole, a)) << paths.front();
  }
}

}  // namespace
}  // namespace gputriage
