// Two runs side by side (`gputriage compare A B`): the figures a team watches,
// which moved and by how much, what changed between the runs (code, settings,
// command, GPU), and which change most plausibly explains each move.
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "gputriage/diagnosis.h"

namespace gputriage {

/// A headline figure of a run: what compare shows side by side, what the run
/// store keeps per run (RunStore::EndRun) and what history judges.
struct FigureDefinition {
  const char* id;     // step_time_ms, data_wait_percent, ...
  const char* label;  // for people
  const char* unit;   // "ms", "percent", "samples/s"
  bool higher_is_better;
  // Judged only between runs of the same batch (samples per step): a step of 32
  // samples takes longer and needs more memory than one of 16.
  bool per_batch = false;
  // The move that counts, in percent of the figure, where it is not a step
  // time's (0: NoiseFloor's rule for the unit).
  double noise_percent = 0;
};
const std::vector<FigureDefinition>& Figures();
const FigureDefinition* FindFigure(const std::string& id);

/// The figures a diagnosis measured (a run without steps has no step time; a
/// figure it could not measure is absent), plus "steps" and "step_time_cv" (the steps'
/// coefficient of variation, 0 without steps) for noise floors, and
/// "samples_per_step" where the steps carry samples.
std::map<std::string, double> FiguresOf(const Diagnosis& d);
/// The goodput ledger's figures (goodput_percent, ledger_*): final only once the
/// job has ended, so a summary the job asks for while it runs leaves them out.
bool IsLedgerFigure(const std::string& id);

/// The smallest move of `figure` that is more than noise: 2 points for shares,
/// else, in percent of the value, max(5 %, three standard errors of the
/// difference of two mean step times over `steps` steps with CV `step_time_cv`).
double NoiseFloor(const FigureDefinition& figure, double step_time_cv, double steps);

/// Why step times of two runs are not comparable, or "" when they are: the
/// samples in a step differ (from the step markers' samples, else a setting
/// named like a batch size that changed). Throughput, per sample, still is.
std::string BatchChange(const std::map<std::string, double>& a_figures, const std::map<std::string, std::string>& a_settings,
                        const std::map<std::string, double>& b_figures, const std::map<std::string, std::string>& b_settings);

/// figures[id], or `fallback` when absent.
double FigureOr(const std::map<std::string, double>& figures, const char* id, double fallback);

/// The program of a command line: its interpreter or launcher, their flags, and
/// the script or module ("python -u train.py"): runs of another script are
/// another experiment's.
std::string CommandProgram(const std::string& command);

/// The settings that differ from `a` to `b` (incidental context such as the exit
/// code left out), and each flag of the command whose value differs
/// ("command --workers": 4 → 0).
std::vector<ConfigChange> SettingsChanges(const std::map<std::string, std::string>& a,
                                          const std::map<std::string, std::string>& b);

/// The change that most plausibly moved `figure` (a FigureDefinition id): the
/// most direct of the settings known to move it (num_workers for data wait,
/// autocast or batch size for compute, ...); null when none changed.
const ConfigChange* PlausibleCause(const std::string& figure, const std::vector<ConfigChange>& changes);

/// One figure of both runs. `worse` when B is worse than A by more than the
/// figure's noise floor (5 % relative, 2 points for shares, or three standard errors of the mean step time from the runs'
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

/// A value in a figure's unit as text: "42.0%", "16.09 ms", "1988.8 samples/s".
std::string FormatFigureValue(const std::string& unit, double value);
inline std::string FormatComparedValue(const ComparedMetric& m, double value) { return FormatFigureValue(m.unit, value); }

/// A move and the change that most plausibly explains it.
struct Explanation {
  std::string metric;
  std::string config_key;  // "" when no recorded change explains it
  std::string text;
};

/// One thing under the headline figures, in both runs: a kernel, a kernel
/// class, a part of the step (kernels, copies, the runtime...), a marked phase,
/// or a cause of the device's idle time; ms per step (NaN: absent in that run).
struct ComparedPart {
  std::string kind;  // "kernel", "kernel_class", "step_part", "phase", "idle_cause"
  std::string name;
  double before_ms = NAN, after_ms = NAN;
  // A kernel in one run's table of its largest kernels and not in the other's:
  // its time there is unknown (below that table), so is its move.
  bool unknown_move = false;
  double delta_ms() const {
    if (unknown_move) return 0;
    return (std::isnan(after_ms) ? 0 : after_ms) - (std::isnan(before_ms) ? 0 : before_ms);
  }
};

struct Comparison {
  std::string a_name, b_name;
  // Why the two runs cannot be compared ("" when they can): no figure in
  // common, or two different programs. compare refuses them unless forced.
  std::string not_comparable;
  // What moved underneath the headline, largest move in ms per step first, as a
  // profiler's diff ranks it; `parts_basis` says what a step is on each side.
  std::vector<ComparedPart> parts;
  std::string parts_basis;
  std::vector<ComparedMetric> metrics;      // measured in both runs
  std::vector<ConfigChange> config_changes; // settings, tags, commit, command, GPU
  std::vector<std::string> a_verdicts, b_verdicts;  // "input_bound (high)"
  std::vector<Explanation> explanations;    // one per worse or better metric
  bool settings_recorded = true;            // both inputs carry their settings (a trace or metric log carries none)
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
