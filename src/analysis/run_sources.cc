#include "src/analysis/run_sources.h"

#include <algorithm>
#include <ctime>
#include <limits>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "src/util/strings.h"

namespace gputriage {
namespace {

// Sources a few minutes apart are still one job (a trace taken near the end of a
// metric log, clocks of two hosts); hours or years apart are not.
constexpr TimeNs kSameRunSlackNs = 10 * 60 * kNsPerS;
// Before 2001-09-09 (1e18 ns since 1970) a "wall clock" is a relative one.
constexpr TimeNs kPlausibleEpochNs = 1'000'000'000'000'000'000;
// nvidia-smi writes local time without a zone: its clock may be off UTC by up
// to 14 hours either way (UTC-12 .. UTC+14).
constexpr TimeNs kUnknownZoneSlackNs = 14 * 3600 * kNsPerS;

struct SourceFacts {
  std::optional<Interval> span;   // wall clock, when the source has one
  bool zone_unknown = false;      // local time of an unknown zone (nvidia-smi)
  std::set<std::string> models;   // GPU model names
  bool trace = false;
  int rank = -1;
  int64_t host_pid = -1;
  std::string format;
  std::string name;
};

SourceFacts FactsOf(const Recording& rec, const RecordingAnalysis& analysis) {
  SourceFacts f;
  f.trace = IsTraceFormat(rec.format);
  f.rank = rec.rank;
  f.host_pid = rec.host_pid;
  f.format = rec.format;
  f.name = FileName(rec.source_path);
  TimeNs lo = std::numeric_limits<TimeNs>::max(), hi = std::numeric_limits<TimeNs>::min();
  const auto take = [&](const Interval& i) {
    lo = std::min(lo, i.start);
    hi = std::max(hi, i.end);
  };
  if (analysis.timeline.event_span) take(*analysis.timeline.event_span);  // kernels and host spans
  for (const auto& s : rec.marked_steps) take(s.span);
  if (!rec.metrics.timestamps_synthetic)
    for (const auto& d : rec.metrics.devices)
      for (int m = 0; m < kNumMetrics; ++m)
        if (d.Has(static_cast<Metric>(m))) {
          const auto& series = d.Get(static_cast<Metric>(m));
          take(Interval{series.first_time(), series.last_time()});
        }
  if (rec.clock_is_absolute && lo <= hi && lo >= kPlausibleEpochNs) f.span = Interval{lo, hi};
  f.zone_unknown = rec.format == "nvidia-smi-csv" || rec.format == "nvidia-smi-q" || rec.format == "nvidia-smi-dmon" ||
                   rec.format == "nvidia-smi-table" || rec.format == "capture-bundle";
  for (const auto& d : rec.devices)
    if (!d.name.empty()) f.models.insert(AsciiLower(d.name));
  for (const auto& d : rec.metrics.devices)
    if (!d.name.empty()) f.models.insert(AsciiLower(d.name));
  return f;
}

std::string Day(TimeNs t) {
  const time_t seconds = static_cast<time_t>(t / kNsPerS);
  struct tm utc {};
  char text[32] = "?";
  if (gmtime_r(&seconds, &utc) != nullptr) std::strftime(text, sizeof text, "%Y-%m-%d %H:%M UTC", &utc);
  return text;
}

/// Why `f` cannot join a group holding `members` ("" when it can), as the note
/// that says so.
std::string Conflict(const SourceFacts& f, const std::vector<const SourceFacts*>& members) {
  const std::string apart = ": they are not one run, so " + f.name +
                            " is judged on its own and its evidence is not merged with the others'";
  for (const SourceFacts* m : members) {
    // A PyTorch profiler trace and an Nsight Systems export of one process (both
    // profilers on one job) are that rank twice, not two ranks.
    if (f.trace && m->trace && f.format != m->format && f.host_pid > 0 && f.host_pid == m->host_pid)
      return fmt::format("{} ({}) and {} ({}) are one process (pid {}) seen by two profilers, not two ranks: {} is "
                         "judged on its own, beside the other",
                         m->name, m->format, f.name, f.format, f.host_pid, f.name);
    const TimeNs slack = kSameRunSlackNs + (f.zone_unknown != m->zone_unknown ? kUnknownZoneSlackNs : 0);
    if (f.span && m->span && (f.span->start > m->span->end + slack || m->span->start > f.span->end + slack))
      return fmt::format("{} ({}) and {} ({}) do not overlap in time", f.name, Day(f.span->start), m->name,
                         Day(m->span->start)) + apart;
    if (!f.models.empty() && !m->models.empty() &&
        std::none_of(f.models.begin(), f.models.end(), [&](const std::string& x) { return m->models.count(x) > 0; }))
      return fmt::format("{} ran on {} and {} on {}", f.name, *f.models.begin(), m->name, *m->models.begin()) + apart;
    if (f.trace && m->trace && f.rank >= 0 && f.rank == m->rank)
      return fmt::format("{} and {} both say they are rank {}", f.name, m->name, f.rank) + apart;
  }
  return "";
}

}  // namespace

RunSources GroupSourcesIntoRuns(const Run& run, const std::vector<RecordingAnalysis>& analyses) {
  RunSources out;
  std::vector<SourceFacts> facts;
  for (size_t i = 0; i < run.recordings.size(); ++i) facts.push_back(FactsOf(run.recordings[i], analyses.at(i)));
  std::vector<std::vector<const SourceFacts*>> groups;
  for (const auto& f : facts) {
    std::string first_conflict;
    int joined = -1;
    for (size_t g = 0; g < groups.size() && joined < 0; ++g) {
      std::string why = Conflict(f, groups[g]);
      if (why.empty()) joined = static_cast<int>(g);
      else if (first_conflict.empty()) first_conflict = std::move(why);
    }
    if (joined < 0) {
      joined = static_cast<int>(groups.size());
      groups.emplace_back();
      if (!first_conflict.empty()) out.notes.push_back(first_conflict);
    }
    groups[static_cast<size_t>(joined)].push_back(&f);
    out.group.push_back(joined);
  }
  out.groups = static_cast<int>(groups.size());
  return out;
}

}  // namespace gputriage
