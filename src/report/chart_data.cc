// Builds the chart document from a run and its diagnosis. Times are seconds
// from the recording's first event, so the browser never handles int64 ns.
#include "src/report/chart_data.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "gputriage/markers.hpp"
#include "src/analysis/interval_stream.h"
#include "src/analysis/intervals.h"
#include "src/analysis/trace_timeline.h"

namespace gputriage {
namespace {

// Marked phases by slot (kPhaseNames[0] is unused), as MarkedStep::phase_ns holds them.
constexpr int kPhases = static_cast<int>(std::size(kPhaseNames));
static_assert(std::tuple_size_v<decltype(MarkedStep::phase_ns)> == std::size(kPhaseNames));

using json = nlohmann::json;

static_assert(kChartPoints == analysis::kTimelineBuckets, "a trace's timeline is measured at the charts' resolution");

// Short decimal forms keep the document small: times to the microsecond,
// percents to a hundredth.
double Round(double v, double scale) { return std::round(v * scale) / scale; }
json Seconds(TimeNs t, TimeNs t0) { return Round(static_cast<double>(t - t0) / 1e9, 1e6); }
json Percent(double v) { return std::isfinite(v) ? json(Round(v, 100)) : json(nullptr); }

/// The boundaries of `steps` (each given as its span and number by `describe`),
/// when few enough to draw.
template <typename Steps, typename Describe>
json StepBoundaries(const Steps& steps, const char* source, Describe describe, TimeNs t0) {
  const bool drawn = steps.size() <= kChartMaxStepBoundaries;
  json st = {{"count", steps.size()}, {"source", source}, {"drawn", drawn}};
  if (!drawn) return st;
  json s0 = json::array(), s1 = json::array(), n = json::array();
  for (const auto& step : steps) {
    const auto [span, number] = describe(step);
    s0.push_back(Seconds(span.start, t0));
    s1.push_back(Seconds(span.end, t0));
    n.push_back(number);
  }
  st.update({{"start_s", s0}, {"end_s", s1}, {"number", n}});
  return st;
}

json BucketSeries(const std::vector<double>& percent, TimeNs start, TimeNs end, TimeNs t0) {
  json t = json::array(), v = json::array();
  const double width = static_cast<double>(end - start) / static_cast<double>(percent.size());
  for (size_t i = 0; i < percent.size(); ++i) {
    t.push_back(Round((static_cast<double>(start - t0) + width * static_cast<double>(i)) / 1e9, 1e6));
    v.push_back(Percent(percent[i]));
  }
  return {{"t_s", t}, {"percent", v}, {"bucket_s", Round(width / 1e9, 1e9)}};
}

/// One sketch timeline: bucket starts, time-weighted means, and each bucket's extremes.
json SketchSeries(const SeriesSketch& s, TimeNs t0) {
  json t = json::array(), mean = json::array(), lo = json::array(), hi = json::array();
  for (const auto& p : s.Timeline(kChartPoints)) {
    t.push_back(Seconds(p.start, t0));
    mean.push_back(Percent(p.mean));
    lo.push_back(Percent(p.min));
    hi.push_back(Percent(p.max));
  }
  return {{"t_s", t}, {"mean", mean}, {"min", lo}, {"max", hi}};
}

constexpr Metric kActivityMetrics[] = {Metric::kGpuUtil, Metric::kGrEngineActive, Metric::kSmActive,
                                       Metric::kTensorActive, Metric::kDramActive, Metric::kJobSmUtil};

/// Step boundaries and per-step phase bars from step markers. Several processes
/// (ranks) overlap in time: boundaries are drawn for the first process, and the
/// data-wait share is the mean over processes.
void AddMarkedSteps(json& out, const std::vector<MarkedStep>& steps, TimeNs t0, TimeNs start, TimeNs end) {
  if (steps.empty()) return;
  std::map<uint32_t, int> processes;
  for (const auto& s : steps) ++processes[s.pid];
  const uint32_t first_pid = processes.begin()->first;
  std::vector<const MarkedStep*> mine;
  std::map<uint32_t, intervals::List> waits;  // per process
  for (const auto& s : steps) {
    if (s.pid == first_pid) mine.push_back(&s);
    // The wait opens the step's span (a batch fetched between steps is that step's wait).
    if (s.data_wait_ns() > 0) waits[s.pid].push_back({s.span.start, std::min(s.span.end, s.span.start + s.data_wait_ns())});
  }
  json st = StepBoundaries(mine, "step markers", [](const MarkedStep* m) { return std::pair(m->span, m->number); }, t0);
  st["pid"] = first_pid;
  st["processes"] = processes.size();
  out["steps"] = st;
  if (!waits.empty() && end > start) {
    // The mean over processes: each process's share, summed and divided.
    std::vector<double> share(kChartPoints, 0.0);
    for (auto& [pid, iv] : waits) {
      const auto c = analysis::CoveragePercent(intervals::Merge(std::move(iv)), start, end, kChartPoints);
      for (size_t i = 0; i < share.size(); ++i) share[i] += c[i] / static_cast<double>(processes.size());
    }
    out["data_wait"] = BucketSeries(share, start, end, t0);
    out["data_wait"]["source"] = "step markers' data phase";
  }
  // Phase bars of the first process, grouped so at most kChartMaxStepBars remain.
  const size_t group = (mine.size() + kChartMaxStepBars - 1) / kChartMaxStepBars;
  json bars = {{"group", group}, {"source", "step markers"}, {"step", json::array()}, {"phases", json::object()}};
  std::vector<std::string> names;
  for (int p = 1; p < kPhases; ++p) names.emplace_back(kPhaseNames[p]);
  names.emplace_back("unmarked");
  for (const auto& n : names) bars["phases"][n] = json::array();
  for (size_t i = 0; i < mine.size(); i += group) {
    const size_t stop = std::min(mine.size(), i + group);
    std::array<double, kPhases + 1> sum{};
    for (size_t k = i; k < stop; ++k) {
      TimeNs marked = 0;
      for (int p = 1; p < kPhases; ++p) {
        sum[static_cast<size_t>(p)] += static_cast<double>(mine[k]->phase_ns[static_cast<size_t>(p)]);
        marked += mine[k]->phase_ns[static_cast<size_t>(p)];
      }
      sum[kPhases] += static_cast<double>(std::max<TimeNs>(0, mine[k]->span.duration() - marked));
    }
    bars["step"].push_back(mine[i]->number);
    const double n = static_cast<double>(stop - i);
    for (int p = 1; p <= kPhases; ++p)
      bars["phases"][names[static_cast<size_t>(p - 1)]].push_back(Round(sum[static_cast<size_t>(p)] / n / 1e6, 1000));
  }
  out["step_phases"] = bars;
}

/// Memory at step ends of the first process that sampled it (zero-code mode):
/// the host's resident set and, where a GPU was used, its allocator's
/// allocated, reserved and peak bytes, in MiB at each step's end. Past
/// kChartPoints samples, each group of consecutive ones keeps its highest, so
/// no peak is lost.
json StepMemory(const std::vector<MarkedStep>& steps, TimeNs t0) {
  std::vector<const MarkedStep*> sampled;
  for (const auto& s : steps)
    if (s.memory_sampled() && (sampled.empty() || s.pid == sampled.front()->pid)) sampled.push_back(&s);
  if (sampled.empty()) return nullptr;
  std::stable_sort(sampled.begin(), sampled.end(),
                   [](const MarkedStep* a, const MarkedStep* b) { return a->span.end < b->span.end; });
  const bool gpu = std::any_of(sampled.begin(), sampled.end(), [](const MarkedStep* s) { return s->memory_device >= 0; });
  const size_t group = (sampled.size() + kChartPoints - 1) / kChartPoints;
  constexpr double kMiB = 1024.0 * 1024.0;
  json t = json::array(), step = json::array(), rss = json::array(), allocated = json::array(), reserved = json::array(),
       peak = json::array();
  const auto mib = [&](int64_t v) { return v > 0 ? json(Round(static_cast<double>(v) / kMiB, 100)) : json(nullptr); };
  for (size_t i = 0; i < sampled.size(); i += group) {
    const size_t stop = std::min(sampled.size(), i + group);
    const MarkedStep* top = sampled[i];
    int64_t r = 0, a = 0, res = 0, pk = 0;
    for (size_t k = i; k < stop; ++k) {
      r = std::max(r, sampled[k]->host_rss_bytes);
      a = std::max(a, sampled[k]->device_allocated_bytes);
      res = std::max(res, sampled[k]->device_reserved_bytes);
      pk = std::max(pk, sampled[k]->device_peak_bytes);
      if (sampled[k]->device_allocated_bytes >= top->device_allocated_bytes) top = sampled[k];
    }
    t.push_back(Seconds(top->span.end, t0));
    step.push_back(top->number);
    rss.push_back(mib(r));
    if (gpu) {
      allocated.push_back(mib(a));
      reserved.push_back(mib(res));
      peak.push_back(mib(pk));
    }
  }
  json out = {{"pid", sampled.front()->pid}, {"group", group}, {"source", "memory at step ends (zero-code mode)"},
              {"t_s", t}, {"step", step}, {"host_rss_mib", rss}};
  if (gpu) {
    out["device"] = sampled.front()->memory_device;
    out["gpu_allocated_mib"] = allocated;
    out["gpu_reserved_mib"] = reserved;
    out["gpu_peak_mib"] = peak;
  }
  return out;
}

/// The job's time as its goodput ledger bucketed it (the first process's
/// timeline, src/analysis/ledger.cc): what the report's phase lane draws.
json JobPhases(const RunLedger& l, TimeNs t0) {
  if (!l.valid || l.timeline.empty()) return nullptr;
  json segments = json::array();
  TimeNs start = l.timeline.front().span.start, end = l.timeline.front().span.end;
  for (const auto& seg : l.timeline) {
    // A run of steps is "steps" in the chart document (the ledger's productive).
    segments.push_back({{"kind", seg.bucket == "productive" ? std::string("steps") : seg.bucket},
                        {"start_s", Seconds(seg.span.start, t0)}, {"end_s", Seconds(seg.span.end, t0)}});
    start = std::min(start, seg.span.start);
    end = std::max(end, seg.span.end);
  }
  return {{"pid", l.timeline_pid}, {"segments", segments}, {"dropped", l.timeline_dropped},
          {"start_s", Seconds(start, t0)}, {"end_s", Seconds(end, t0)}};
}

std::string DeviceLabel(const RecordingAnalysis& a) {
  std::string label = "GPU " + std::to_string(a.device.id);
  if (!a.device.name.empty()) label += " (" + a.device.name + ")";
  return label;
}

json RecordingCharts(size_t index, const Recording& rec, const RecordingAnalysis& a) {
  json out = {{"recording", index}, {"source", rec.source_path}, {"format", rec.format}, {"gpus", json::array()},
              {"busy", nullptr}, {"steps", nullptr}, {"data_wait", nullptr}, {"step_phases", nullptr}};
  // The recording's clock origin: its earliest event of any kind drawn here.
  TimeNs t0 = INT64_MAX, t1 = INT64_MIN;
  auto widen = [&](TimeNs s, TimeNs e) {
    t0 = std::min(t0, s);
    t1 = std::max(t1, e);
  };
  // The primary device's kernels bound the clock (measured with the analysis).
  const TraceTimeline& timeline = a.timeline;
  if (timeline.busy_extent) widen(timeline.busy_extent->start, timeline.busy_extent->end);
  for (const auto& s : a.steps) widen(s.window.start, s.window.end);
  for (const auto& s : rec.marked_steps) widen(s.span.start, s.span.end);
  if (!rec.marked_steps.empty() && rec.job_span.end > rec.job_span.start) widen(rec.job_span.start, rec.job_span.end);
  for (const auto& d : rec.metrics.devices)
    for (Metric m : kActivityMetrics)
      if (d.Has(m)) widen(d.Get(m).first_time(), d.Get(m).last_time());
  if (t0 > t1) return out;
  out["t0_ns"] = t0;
  out["duration_s"] = Seconds(t1, t0);

  // Trace: the primary device's kernel coverage, the share of time any kernel runs
  // (the same quantity utilization.gpu samples), over the steps when there are steps.
  if (a.has_gpu_activity && timeline.busy_extent) {
    const bool profiler_steps = !a.steps.empty() && a.steps_from_markers;
    // None when the analysis could not read the kernels (a scratch file gone): no chart then.
    if (!timeline.busy_percent.empty()) {
      out["busy"] = BucketSeries(timeline.busy_percent, timeline.window.start, timeline.window.end, t0);
      out["busy"]["label"] = DeviceLabel(a);
      out["busy"]["source"] = "kernel time in the trace (any kernel running)";
      if (!timeline.data_wait_percent.empty()) {
        out["data_wait"] = BucketSeries(timeline.data_wait_percent, timeline.window.start, timeline.window.end, t0);
        out["data_wait"]["source"] = "DataLoader spans in the trace";
      }
    }
    if (profiler_steps)
      out["steps"] = StepBoundaries(a.steps, "ProfilerStep markers",
                                    [](const StepBreakdown& b) { return std::pair(b.window, b.number); }, t0);
  }
  AddMarkedSteps(out, rec.marked_steps, t0, t0, t1);
  out["job_phases"] = JobPhases(a.ledger, t0);
  out["step_memory"] = StepMemory(rec.marked_steps, t0);

  // Every GPU with an activity series, least busy first past kChartMaxGpus, else in order.
  std::vector<size_t> drawn;
  for (size_t i = 0; i < rec.metrics.devices.size(); ++i)
    for (Metric m : kActivityMetrics)
      if (rec.metrics.devices[i].Has(m)) {
        drawn.push_back(i);
        break;
      }
  out["gpus_total"] = drawn.size();
  if (drawn.size() > kChartMaxGpus) {
    auto busy_mean = [&](size_t i) {
      const auto& d = rec.metrics.devices[i];
      for (Metric m : kActivityMetrics)
        if (d.Has(m)) return d.Get(m).mean();
      return 0.0;
    };
    std::stable_sort(drawn.begin(), drawn.end(), [&](size_t x, size_t y) { return busy_mean(x) < busy_mean(y); });
    drawn.resize(kChartMaxGpus);
    std::sort(drawn.begin(), drawn.end());
    out["gpus_note"] = "charts for the " + std::to_string(kChartMaxGpus) + " least busy of " + std::to_string(out["gpus_total"].get<size_t>()) +
                       " GPUs (by mean utilization); every GPU is in the verdicts and the JSON report";
  }
  for (size_t i : drawn) {
    const auto& d = rec.metrics.devices[i];
    json g = {{"label", d.Label()}, {"name", d.name}, {"series", json::object()}};
    for (Metric m : kActivityMetrics)
      if (d.Has(m)) g["series"][MetricName(m)] = SketchSeries(d.Get(m), t0);
    out["gpus"].push_back(std::move(g));
  }
  return out;
}

}  // namespace

std::string RenderChartJson(const Run& run, const Diagnosis& diagnosis, int indent) {
  json doc = {{"schema", "gputriage.charts"}, {"schema_version", 1}, {"points", kChartPoints}, {"recordings", json::array()}};
  for (size_t i = 0; i < run.recordings.size() && i < diagnosis.recordings.size(); ++i)
    doc["recordings"].push_back(RecordingCharts(i, run.recordings[i], diagnosis.recordings[i]));
  return doc.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace gputriage
