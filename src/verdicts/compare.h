// Two runs side by side (`gputriage compare A B`): the figures a team watches,
// which moved and by how much, what changed between the runs (code, settings,
// command, GPU), and which change most plausibly explains each move.
#pragma once

#include <string>
#include <vector>

#include "gputriage/diagnosis.h"

namespace gputriage {

/// One figure of both runs. `worse` when B is worse than A by more than the
/// figure's noise floor (5 % relative, 2 points for shares, or twice the runs'
/// step-time CV where the steps give one).
struct ComparedMetric {
  std::string metric;   // stable id: step_time_ms, data_wait_percent, ...
  std::string label;    // for people
  std::string unit;     // "ms", "percent", "samples/s"
  double before = 0;
  double after = 0;
  double change_percent = 0;  // (after − before) / before × 100
  bool higher_is_better = false;
  bool worse = false;
  bool better = false;
  std::string noise_floor;    // what a change had to pass
};

/// A value of `m` as text: "42.0%", "16.09 ms", "1988.8 samples/s".
std::string FormatComparedValue(const ComparedMetric& m, double value);

struct ConfigChange {
  std::string key;
  std::string before;  // "" when absent in A
  std::string after;   // "" when absent in B
};

/// A move and the change that most plausibly explains it.
struct Explanation {
  std::string metric;
  std::string config_key;  // "" when no recorded change explains it
  std::string text;
};

struct Comparison {
  std::string a_name, b_name;
  std::vector<ComparedMetric> metrics;      // measured in both runs
  std::vector<ConfigChange> config_changes; // settings, tags, commit, command, GPU
  std::vector<std::string> a_verdicts, b_verdicts;  // "input_bound (high)"
  std::vector<Explanation> explanations;    // one per worse or better metric
  std::vector<ComparedMetric> regressions() const;
};

/// Compares run B against run A (each diagnosed on its own; `a_meta`/`b_meta` are
/// the runs' recorded settings, tags and context, merged over their recordings).
Comparison CompareRuns(const std::string& a_name, const Run& a_run, const Diagnosis& a,
                       const std::string& b_name, const Run& b_run, const Diagnosis& b);

/// The comparison as a JSON document (schema "gputriage.comparison") and as text
/// (src/report/compare_report.cc).
std::string RenderComparisonJson(const Comparison& c);
std::string RenderComparisonText(const Comparison& c);

}  // namespace gputriage
