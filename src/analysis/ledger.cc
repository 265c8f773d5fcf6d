#include "src/analysis/ledger.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <cctype>

#include <fmt/format.h>

#include "gputriage/markers.h"
#include "src/analysis/analysis_internal.h"
#include "src/analysis/ledger_buckets.h"
#include "src/analysis/trace_events.h"
#include "src/markers/marked_steps.h"
#include "src/util/strings.h"

namespace gputriage::analysis {

namespace ledger_internal {

int PhaseBucket(uint16_t phase) {
  switch (phase) {
    case GPUTRIAGE_PHASE_RESTORE: return kCheckpointRestore;
    case GPUTRIAGE_PHASE_COMPILE: return kCompileWarmup;
    case GPUTRIAGE_PHASE_CHECKPOINT: return kCheckpointSave;
    case GPUTRIAGE_PHASE_EVAL: return kEvaluation;
    default: return -1;
  }
}
int PhasePriority(int bucket) {
  switch (bucket) {
    case kCheckpointRestore: return 4;
    case kCompileWarmup: return 3;
    case kCheckpointSave: return 2;
    case kEvaluation: return 1;
    default: return 0;
  }
}

std::vector<Segment> PhaseSegments(const std::vector<const RunPhase*>& phases, Interval job) {
  std::vector<std::pair<TimeNs, int>> edges;  // (time, +bucket+1 opens / -(bucket+1) closes)
  for (const RunPhase* p : phases) {
    const int bucket = PhaseBucket(p->phase);
    const Interval s{std::max(p->span.start, job.start), std::min(p->span.end, job.end)};
    if (bucket < 0 || s.end <= s.start) continue;
    edges.push_back({s.start, bucket + 1});
    edges.push_back({s.end, -(bucket + 1)});
  }
  std::sort(edges.begin(), edges.end());
  std::array<int, kNumBuckets> open{};
  std::vector<Segment> out;
  for (size_t i = 0; i < edges.size();) {
    const TimeNs t = edges[i].first;
    for (; i < edges.size() && edges[i].first == t; ++i) {
      const int e = edges[i].second;
      open[static_cast<size_t>(std::abs(e) - 1)] += e > 0 ? 1 : -1;
    }
    if (i == edges.size()) break;
    int best = -1;
    for (int b = 0; b < kNumBuckets; ++b)
      if (open[static_cast<size_t>(b)] > 0 && (best < 0 || PhasePriority(b) > PhasePriority(best))) best = b;
    if (best < 0) continue;
    const Interval span{t, edges[i].first};
    if (!out.empty() && out.back().bucket == best && out.back().span.end == span.start) out.back().span.end = span.end;
    else out.push_back({span, best});
  }
  return out;
}

TimeNs Covered(const std::vector<Segment>& segments, Interval span) {
  auto it = std::lower_bound(segments.begin(), segments.end(), span.start,
                             [](const Segment& s, TimeNs t) { return s.span.end <= t; });
  TimeNs covered = 0;
  for (; it != segments.end() && it->span.start < span.end; ++it)
    covered += std::max<TimeNs>(0, std::min(it->span.end, span.end) - std::max(it->span.start, span.start));
  return covered;
}

InsidePhases PhasesInside(const MarkedStep& s, TimeNs span_ns, TimeNs visible, bool no_gpu) {
  // In proportion to what of the step is visible (the rest is under a job phase).
  const double scale = span_ns > 0 ? static_cast<double>(visible) / static_cast<double>(span_ns) : 0;
  InsidePhases p;
  p.data = static_cast<double>(s.phase_ns[GPUTRIAGE_PHASE_DATA]) * scale;
  p.communication = static_cast<double>(s.phase_ns[GPUTRIAGE_PHASE_COMMUNICATION]) * scale;
  p.checkpoint = static_cast<double>(s.phase_ns[GPUTRIAGE_PHASE_CHECKPOINT]) * scale;
  if (s.phases_traced() && (no_gpu || s.device_ns > 0)) {
    TimeNs rest = std::max<TimeNs>(0, span_ns - s.marked_phases_ns());  // of the span as clipped here
    if (s.device_ns > 0) rest = std::min(rest, std::max<TimeNs>(0, span_ns - s.device_ns));
    p.host_stall = static_cast<double>(rest) * scale;
  }
  const double marked = p.data + p.communication + p.checkpoint + p.host_stall;
  if (marked > static_cast<double>(visible)) {  // overlapping phase markers: never more than the step
    const double fit = static_cast<double>(visible) / marked;
    p.data *= fit, p.communication *= fit, p.checkpoint *= fit, p.host_stall *= fit;
  }
  return p;
}

}  // namespace ledger_internal

using namespace ledger_internal;

namespace {

struct Tally {
  std::array<double, kNumBuckets> ns{};
  std::array<int64_t, kNumBuckets> count{};
  TimeNs median_step_ns = 0;
  int64_t warmup_steps = 0;
  int64_t lost_steps = 0;
  std::vector<Segment> timeline;  // with `keep_timeline`: every step, phase and gap by its bucket
};

/// The timeline as a report draws it: by start, the phases over what they
/// cover, a run of steps with the short gaps between them one segment, at
/// most kMaxLedgerTimeline segments (the rest counted in `dropped`).
std::vector<LedgerSegment> DrawnTimeline(std::vector<Segment> raw, int64_t& dropped) {
  auto lane_bucket = [](int b) { return b == kBetweenSteps ? kProductive : b; };
  auto is_phase = [](int b) { return b == kCheckpointRestore || b == kCheckpointSave || b == kEvaluation || b == kCompileWarmup; };
  std::stable_sort(raw.begin(), raw.end(), [&](const Segment& a, const Segment& b) {
    const bool ap = is_phase(a.bucket), bp = is_phase(b.bucket);
    return ap != bp ? !ap : a.span.start < b.span.start;
  });
  std::vector<LedgerSegment> out;
  dropped = 0;
  for (const Segment& seg : raw) {
    const int b = lane_bucket(seg.bucket);
    if (!out.empty() && out.back().bucket == kBucketNames[b].name && out.back().span.end == seg.span.start) {
      out.back().span.end = seg.span.end;
      continue;
    }
    if (out.size() >= kMaxLedgerTimeline) {
      ++dropped;
      continue;
    }
    out.push_back({kBucketNames[b].name, seg.span});
  }
  return out;
}

/// One process's timeline over the job's span (its steps, the job's phases).
Tally TallyProcess(const std::vector<const MarkedStep*>& steps, const std::vector<Segment>& phases, Interval job,
                   std::optional<int> exit_code, bool keep_timeline, bool no_gpu) {
  Tally t;
  auto mark = [&](Interval span, int bucket) {
    if (keep_timeline && span.end > span.start) t.timeline.push_back({span, bucket});
  };
  for (const Segment& s : phases) {
    t.ns[static_cast<size_t>(s.bucket)] += static_cast<double>(s.span.duration());
    ++t.count[static_cast<size_t>(s.bucket)];
    mark(s.span, s.bucket);
  }
  // Steps clipped to the job and to the previous step's end (nested steps count once).
  std::vector<Interval> spans;
  TimeNs previous_end = job.start;
  for (const MarkedStep* s : steps) {
    const Interval span{std::max({s->span.start, job.start, previous_end}), std::min(s->span.end, job.end)};
    spans.push_back(span.end > span.start ? span : Interval{span.start, span.start});
    previous_end = std::max(previous_end, spans.back().end);
  }
  std::vector<TimeNs> durations;
  for (const auto& span : spans) durations.push_back(span.duration());
  t.median_step_ns = static_cast<TimeNs>(Median(durations));
  const bool failed = exit_code && *exit_code != 0;
  // Work since the last checkpoint is lost when the job fails: a step ending
  // after the last save (a save marked outside steps, or inside one).
  TimeNs last_save = job.start;
  for (const Segment& s : phases)
    if (s.bucket == kCheckpointSave) last_save = std::max(last_save, s.span.end);
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i]->phase_ns[GPUTRIAGE_PHASE_CHECKPOINT] > 0) last_save = std::max(last_save, spans[i].end);
  bool warming = steps.size() >= 5;
  for (size_t i = 0; i < steps.size(); ++i) {
    const MarkedStep& s = *steps[i];
    const Interval span = spans[i];
    const TimeNs visible = span.duration() - Covered(phases, span);
    if (visible <= 0) continue;
    warming = warming && span.duration() > static_cast<TimeNs>(kWarmupStepFactor * static_cast<double>(t.median_step_ns));
    if (failed && span.end > last_save) {
      t.ns[kLostWork] += static_cast<double>(visible);
      ++t.count[kLostWork];
      ++t.lost_steps;
      mark(span, kLostWork);
      continue;
    }
    if (warming) {
      t.ns[kCompileWarmup] += static_cast<double>(visible);
      ++t.count[kCompileWarmup];
      ++t.warmup_steps;
      mark(span, kCompileWarmup);
      continue;
    }
    mark(span, kProductive);
    const InsidePhases inside = PhasesInside(s, span.duration(), visible, no_gpu);
    const double data = inside.data, comm = inside.communication, save = inside.checkpoint, stall = inside.host_stall;
    t.ns[kDataWait] += data;
    t.ns[kCommunication] += comm;
    t.ns[kCheckpointSave] += save;
    t.ns[kHostStall] += stall;
    if (s.phase_ns[GPUTRIAGE_PHASE_CHECKPOINT] > 0) ++t.count[kCheckpointSave];
    t.ns[kProductive] += static_cast<double>(visible) - data - comm - save - stall;
    ++t.count[kProductive];
  }
  // The gaps: the job's span less the steps and the phases.
  std::vector<Interval> covered;
  for (const auto& span : spans)
    if (span.end > span.start) covered.push_back(span);
  for (const Segment& s : phases) covered.push_back(s.span);
  std::sort(covered.begin(), covered.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  const TimeNs first_step = spans.empty() ? job.end : spans.front().start;
  const TimeNs last_step = spans.empty() ? job.start : previous_end;
  const TimeNs idle_after = std::max(kIdleGapMinNs, static_cast<TimeNs>(kIdleGapSteps * static_cast<double>(t.median_step_ns)));
  const TimeNs hang_after = std::max(kHangMinNs, static_cast<TimeNs>(kHangSteps * static_cast<double>(t.median_step_ns)));
  const bool killed = failed && *exit_code > 128;
  auto gap = [&](Interval g) {
    if (g.end <= g.start) return;
    // A gap straddling the first or last step's edge is cut there.
    if (g.start < first_step) {
      const TimeNs cut = std::min(g.end, first_step);
      t.ns[kStartup] += static_cast<double>(cut - g.start);
      ++t.count[kStartup];
      mark({g.start, cut}, kStartup);
      g.start = cut;
    }
    if (g.end > last_step && g.start < g.end) {
      const TimeNs cut = std::max(g.start, last_step);
      const TimeNs tail = job.end - last_step;
      const int bucket = !failed ? kTeardown : (killed && tail >= hang_after ? kHang : kCrash);
      t.ns[static_cast<size_t>(bucket)] += static_cast<double>(g.end - cut);
      ++t.count[static_cast<size_t>(bucket)];
      mark({cut, g.end}, bucket);
      g.end = cut;
    }
    if (g.end <= g.start) return;
    const int bucket = g.duration() >= idle_after ? kIdle : kBetweenSteps;
    t.ns[static_cast<size_t>(bucket)] += static_cast<double>(g.duration());
    ++t.count[static_cast<size_t>(bucket)];
    mark(g, bucket);
  };
  TimeNs at = job.start;
  for (const Interval& c : covered) {
    gap({at, std::min(c.start, job.end)});
    at = std::max(at, c.end);
  }
  gap({at, job.end});
  return t;
}

}  // namespace

const std::vector<std::string>& LedgerBucketNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& b : kBucketNames) v.emplace_back(b.name);
    return v;
  }();
  return names;
}

LedgerGpus JobGpus(const std::vector<DeviceMetricAnalysis>& devices) {
  LedgerGpus out;
  bool any_instance = false;
  for (const auto& d : devices) any_instance = any_instance || d.mig_instance;
  int counted = 0, left_out = 0;
  for (const auto& d : devices) {
    if (any_instance && d.mig_mode && !d.mig_instance) continue;  // its instances stand for it
    if (d.job_use == "not_used") {
      ++left_out;
      continue;
    }
    out.gpus += d.mig_instance ? d.board_share : 1.0;
    ++counted;
  }
  if (counted > 0)
    out.source = fmt::format("{} GPU{} the job used{}{}", counted, counted == 1 ? "" : "s",
                             any_instance ? " (MIG instances by their share of the board)" : "",
                             left_out > 0 ? fmt::format("; {} it did not use left out", left_out) : "");
  return out;
}

RunLedger BuildLedger(const Recording& rec, const LedgerGpus& gpus) {
  RunLedger ledger;
  if (rec.marked_steps.empty()) return ledger;
  // The job's span: from the recorder, else the markers' own extent.
  Interval job = rec.job_span;
  const bool span_known = job.end > job.start;
  if (!span_known) {
    job = {rec.marked_steps.front().span.start, rec.marked_steps.front().span.end};
    for (const auto& s : rec.marked_steps) job.start = std::min(job.start, s.span.start), job.end = std::max(job.end, s.span.end);
    for (const auto& p : rec.run_phases) job.start = std::min(job.start, p.span.start), job.end = std::max(job.end, p.span.end);
  }
  if (job.end <= job.start) return ledger;
  // One timeline per process with steps; phases of a process without steps are the whole job's.
  std::map<uint32_t, std::vector<const MarkedStep*>> steps_of;
  for (const auto& s : rec.marked_steps) steps_of[s.pid].push_back(&s);
  std::vector<double> share(kNumBuckets, 0.0);
  std::array<int64_t, kNumBuckets> count{};
  std::set<int> phases_seen;
  int64_t warmup_steps = 0, lost_steps = 0;
  TimeNs median_step = 0;
  for (auto& [pid, steps] : steps_of) {
    std::sort(steps.begin(), steps.end(), [](const MarkedStep* a, const MarkedStep* b) { return a->span.start < b->span.start; });
    std::vector<const RunPhase*> phases;
    for (const auto& p : rec.run_phases)
      if (p.pid == pid || steps_of.count(p.pid) == 0) phases.push_back(&p);
    for (const RunPhase* p : phases) phases_seen.insert(PhaseBucket(p->phase));
    // The first process's timeline is the one reports draw.
    const bool first = pid == steps_of.begin()->first;
    Tally t = TallyProcess(steps, PhaseSegments(phases, job), job, rec.exit_code, first, gpus.gpus == 0);
    if (first) {
      ledger.timeline = DrawnTimeline(std::move(t.timeline), ledger.timeline_dropped);
      ledger.timeline_pid = pid;
    }
    for (int b = 0; b < kNumBuckets; ++b) {
      share[static_cast<size_t>(b)] += t.ns[static_cast<size_t>(b)] / static_cast<double>(job.duration()) / static_cast<double>(steps_of.size());
      count[static_cast<size_t>(b)] += t.count[static_cast<size_t>(b)];
    }
    warmup_steps += t.warmup_steps;
    lost_steps += t.lost_steps;
    median_step = std::max(median_step, t.median_step_ns);
    for (const MarkedStep* s : steps)
      if (s->phase_ns[GPUTRIAGE_PHASE_CHECKPOINT] > 0) phases_seen.insert(kCheckpointSave);
  }
  bool data_marked = false, comm_marked = false, stall_measured = false;
  for (const auto& s : rec.marked_steps) {
    data_marked = data_marked || s.phase_ns[GPUTRIAGE_PHASE_DATA] > 0;
    comm_marked = comm_marked || s.phase_ns[GPUTRIAGE_PHASE_COMMUNICATION] > 0;
    stall_measured = stall_measured || (s.phases_traced() && (gpus.gpus == 0 || s.device_ns > 0));
  }

  ledger.valid = true;
  ledger.unit = gpus.gpus > 0 ? "gpu_hours" : "job_hours";
  ledger.gpus = gpus.gpus;
  ledger.gpus_source = gpus.gpus > 0 ? gpus.source : "no GPU seen: hours of the job's wall time";
  ledger.wall_hours = static_cast<double>(job.duration()) / static_cast<double>(kNsPerS) / 3600.0;
  ledger.span_source = span_known ? "the job from its start to its exit" : "first to last step marker";
  ledger.total = ledger.wall_hours * (gpus.gpus > 0 ? gpus.gpus : 1.0);
  const std::string processes =
      steps_of.size() == 1 ? std::string() : fmt::format(" (the mean of {} processes' timelines)", steps_of.size());
  // Which buckets this source can see, and how each was measured.
  const bool ended_known = rec.exit_code.has_value();
  // Seen, or watched for: zero-code mode marks every torch.save, resume and evaluation.
  const auto watched = rec.metadata.find("zero_code.phases");
  auto phase_known = [&](int bucket, const char* marker) {
    return phases_seen.count(bucket) > 0 ||
           (watched != rec.metadata.end() && watched->second.find(marker) != std::string::npos);
  };
  const auto compile_used = rec.metadata.find("compile.used");
  const bool never_compiled = compile_used != rec.metadata.end() && compile_used->second == "false";
  auto explain = [&](int b) -> std::pair<bool, std::string> {
    switch (b) {
      case kProductive:
        return {true, fmt::format("steps less the phases marked in them{}; host time on the job's clock", processes)};
      case kDataWait:
        if (data_marked) return {true, "the data phase marked in each step (time blocked on the next batch)"};
        return {false, "no data phase marked: any wait for batches is inside productive"};
      case kCommunication:
        if (comm_marked) return {true, "the communication phase marked in each step"};
        return {false, "no communication phase marked: exposed collectives are inside productive"};
      case kHostStall:
        if (stall_measured)
          return {true, gpus.gpus == 0 ? "each step outside its marked phases (forward, backward and optimizer marked): "
                                         "the host's own work"
                                       : "each step outside its marked phases, up to the GPU idle its device time "
                                         "leaves (forward, backward and optimizer marked)"};
        return {false, "no forward/backward/optimizer phases (or no device step times on a GPU): the host's own work "
                       "inside steps is inside productive; a trace shows it (gputriage diagnose on a profile)"};
      case kBetweenSteps:
        return {true, fmt::format("gaps between steps under {} median steps ({:.3g} s): the loop's own overhead",
                                  kIdleGapSteps, static_cast<double>(median_step) * kIdleGapSteps / kNsPerS)};
      case kStartup:
      case kTeardown:
        if (!span_known) return {false, "the job's start and exit are not known (markers only)"};
        return {true, b == kStartup ? "the job's start to its first step, less marked phases"
                                    : "its last step to its exit, less marked phases"};
      case kCompileWarmup: {
        std::string how = warmup_steps > 0 ? fmt::format("{} first steps over {}x the median step", warmup_steps, kWarmupStepFactor)
                                           : fmt::format("no first step over {}x the median step", kWarmupStepFactor);
        if (phase_known(kCompileWarmup, "compile")) how += "; marked compile phases";
        // The bucket's name says compile; a job that never compiled has only warm-up in it.
        if (never_compiled) how += " (warm-up only: the job never called torch.compile)";
        return {true, how};
      }
      case kCheckpointRestore:
      case kCheckpointSave:
      case kEvaluation: {
        const char* marker = b == kCheckpointRestore ? "restore" : b == kCheckpointSave ? "checkpoint" : "eval";
        if (phases_seen.count(b) > 0)
          return {true, fmt::format("phases marked \"{}\" (by the job, or by zero-code mode's hooks)", marker)};
        if (phase_known(b, marker))
          return {true, fmt::format("watched for by zero-code mode (\"{}\"): none happened", marker)};
        return {false, fmt::format("no \"{}\" phase marked: any such time is inside idle, between-steps or steps", marker)};
      }
      case kIdle:
        return {true, fmt::format("gaps between steps of at least {} median steps and {} s, with no marked phase",
                                  kIdleGapSteps, kIdleGapMinNs / kNsPerS)};
      case kHang:
      case kCrash:
      case kLostWork:
        if (!ended_known) return {false, "how the job ended is not known"};
        if (b == kLostWork) return {true, fmt::format("steps after the last checkpoint of a failed job ({} steps)", lost_steps)};
        if (b == kHang)
          return {true, fmt::format("a killed job's time after its last step, when over {} median steps and {} s", kHangSteps,
                                    kHangMinNs / kNsPerS)};
        return {true, "a failed job's time after its last step"};
      default: return {false, ""};
    }
  };
  double productive_share = 0;
  for (int b = 0; b < kUnsplit; ++b) {  // steps split every instant: no unsplit time
    LedgerBucket bucket;
    bucket.name = kBucketNames[b].name;
    bucket.group = kBucketNames[b].group;
    auto [known, source] = explain(b);
    bucket.known = known || share[static_cast<size_t>(b)] > 0;  // measured time is never hidden
    bucket.source = std::move(source);
    bucket.share = share[static_cast<size_t>(b)];
    bucket.hours = bucket.share * ledger.total;
    bucket.count = count[static_cast<size_t>(b)];
    if (b == kProductive) productive_share = bucket.share;
    if (b == kCompileWarmup && never_compiled) bucket.label = "warmup";
    ledger.buckets.push_back(std::move(bucket));
  }
  ledger.goodput = productive_share;
  if (rec.exit_code && *rec.exit_code != 0)
    ledger.notes.push_back(fmt::format("the job ended with exit code {}{}", *rec.exit_code,
                                       *rec.exit_code > 128 ? fmt::format(" (signal {})", *rec.exit_code - 128) : ""));
  return ledger;
}

int AnnotationPhase(std::string_view name) {
  // The name's first word, lower-cased: "Evaluate", "eval: epoch 3", "save_checkpoint#12".
  std::string word;
  for (char c : name) {
    if (c == ' ' || c == ':' || c == '#' || c == '(' || c == '/') break;
    word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (StartsWith(word, "gputriage.")) word = word.substr(10);
  static const std::pair<const char*, uint16_t> kNames[] = {
      {"checkpoint", GPUTRIAGE_PHASE_CHECKPOINT}, {"save_checkpoint", GPUTRIAGE_PHASE_CHECKPOINT},
      {"checkpoint_save", GPUTRIAGE_PHASE_CHECKPOINT}, {"save_model", GPUTRIAGE_PHASE_CHECKPOINT},
      {"eval", GPUTRIAGE_PHASE_EVAL}, {"evaluate", GPUTRIAGE_PHASE_EVAL}, {"evaluation", GPUTRIAGE_PHASE_EVAL},
      {"validation", GPUTRIAGE_PHASE_EVAL}, {"validate", GPUTRIAGE_PHASE_EVAL},
      {"compile", GPUTRIAGE_PHASE_COMPILE}, {"torch_compile", GPUTRIAGE_PHASE_COMPILE},
      {"restore", GPUTRIAGE_PHASE_RESTORE}, {"load_checkpoint", GPUTRIAGE_PHASE_RESTORE}, {"resume", GPUTRIAGE_PHASE_RESTORE}};
  for (const auto& [n, phase] : kNames)
    if (word == n) return phase;
  return 0;
}

RunLedger BuildTraceLedger(const Recording& rec, const RecordingAnalysis& a, const LedgerGpus& gpus) {
  RunLedger ledger;
  if (!a.steps_from_markers || a.steps.empty()) return ledger;
  // The job's phases the trace names: record_function ranges called
  // "checkpoint", "evaluate", ... (AnnotationPhase), outside the steps.
  std::vector<RunPhase> phases;
  TraceEvents events(rec);
  auto spans = events.cpu_spans();
  while (const CpuSpan* span = spans.Next())
    if (span->kind == CpuSpanKind::kUserAnnotation && span->time.end > span->time.start)
      if (const int phase = AnnotationPhase(rec.names.View(span->name)); phase > 0 && phases.size() < StepBuilder::kMaxRunPhases)
        phases.push_back({static_cast<uint16_t>(phase), 0, span->time});
  std::set<int> phases_seen;
  for (const auto& p : phases) phases_seen.insert(PhaseBucket(p.phase));
  // The profiled window: its first step (or named phase) to its last.
  Interval window{a.steps.front().window.start, a.steps.back().window.end};
  for (const auto& p : phases) window.start = std::min(window.start, p.span.start), window.end = std::max(window.end, p.span.end);
  if (window.end <= window.start) return ledger;
  std::vector<const RunPhase*> phase_ptrs;
  for (const auto& p : phases) phase_ptrs.push_back(&p);
  const std::vector<Segment> segments = PhaseSegments(phase_ptrs, window);
  std::array<double, kNumBuckets> ns{};
  std::array<int64_t, kNumBuckets> count{};
  for (const Segment& seg : segments) {
    ns[static_cast<size_t>(seg.bucket)] += static_cast<double>(seg.span.duration());
    ++count[static_cast<size_t>(seg.bucket)];
  }
  std::vector<TimeNs> durations;
  for (const auto& s : a.steps) durations.push_back(s.total());
  const TimeNs idle_after = std::max(kIdleGapMinNs, static_cast<TimeNs>(kIdleGapSteps * Median(durations)));
  auto cat = [](const StepBreakdown& s, StepCategory c) { return static_cast<double>(s.ns[static_cast<size_t>(c)]); };
  std::vector<Interval> covered;
  for (const Segment& seg : segments) covered.push_back(seg.span);
  for (const auto& s : a.steps) {
    if (s.total() <= 0) continue;
    // torch-tb-profiler's categories split each step exactly: the GPU working
    // (kernels, copies), exposed communication, the DataLoader, and the GPU idle
    // while the host runs, launches or waits (runtime, CPU ops, other); in
    // proportion to what of the step no named phase covers.
    const double visible = static_cast<double>(s.total() - Covered(segments, s.window)) / static_cast<double>(s.total());
    ns[kProductive] += visible * (cat(s, StepCategory::kKernel) + cat(s, StepCategory::kMemcpy) + cat(s, StepCategory::kMemset));
    ns[kCommunication] += visible * cat(s, StepCategory::kCommunication);
    ns[kDataWait] += visible * cat(s, StepCategory::kDataLoader);
    ns[kHostStall] += visible * (cat(s, StepCategory::kRuntime) + cat(s, StepCategory::kCpuExec) + cat(s, StepCategory::kOther));
    ++count[kProductive];
    covered.push_back(s.window);
  }
  // The gaps between steps and phases.
  std::sort(covered.begin(), covered.end(), [](const Interval& x, const Interval& y) { return x.start < y.start; });
  TimeNs at = window.start;
  for (const Interval& c : covered) {
    if (c.start > at) {
      const int bucket = c.start - at >= idle_after ? kIdle : kBetweenSteps;
      ns[static_cast<size_t>(bucket)] += static_cast<double>(c.start - at);
      ++count[static_cast<size_t>(bucket)];
    }
    at = std::max(at, c.end);
  }
  double sum = 0;
  for (double v : ns) sum += v;
  if (!(sum > 0)) return ledger;
  ledger.valid = true;
  const double g = gpus.gpus > 0 ? gpus.gpus : 1.0;
  ledger.unit = "gpu_hours";
  ledger.gpus = g;
  ledger.gpus_source = gpus.gpus > 0 ? gpus.source : "the trace's device";
  ledger.wall_hours = static_cast<double>(window.duration()) / static_cast<double>(kNsPerS) / 3600.0;
  ledger.span_source = fmt::format("the {} profiled steps (ProfilerStep#N){}, first to last", a.steps.size(),
                                   phases.empty() ? "" : " and the phases the trace names");
  ledger.total = ledger.wall_hours * g;
  for (int b = 0; b < kUnsplit; ++b) {
    LedgerBucket bucket;
    bucket.name = kBucketNames[b].name;
    bucket.group = kBucketNames[b].group;
    bucket.count = count[static_cast<size_t>(b)];
    switch (b) {
      case kProductive: bucket.source = "kernels and copies inside the steps (torch-tb-profiler's kernel, memcpy, memset)"; break;
      case kCommunication: bucket.source = "communication with no compute beside it inside the steps"; break;
      case kDataWait: bucket.source = "DataLoader time inside the steps"; break;
      case kHostStall: bucket.source = "the GPU idle inside the steps while the host runs, launches or waits (runtime, CPU ops, other)"; break;
      case kBetweenSteps:
      case kIdle:
        bucket.source = fmt::format("gaps between profiled steps, idle from {} median steps and {} s", kIdleGapSteps, kIdleGapMinNs / kNsPerS);
        break;
      case kCheckpointRestore:
      case kCompileWarmup:
      case kCheckpointSave:
      case kEvaluation:
        if (phases_seen.count(b) > 0) {
          bucket.source = "record_function ranges the trace names (\"checkpoint\", \"evaluate\", \"compile\", \"restore\", ...)";
          break;
        }
        [[fallthrough]];
      default:
        bucket.known = false;
        bucket.source = "a profiling window sees its steps only: the job's start, end and phases outside them are not in it";
    }
    // The categories add up to each step's span; shares of the window they cover.
    bucket.share = bucket.known ? ns[static_cast<size_t>(b)] / sum : 0;
    bucket.hours = bucket.share * ledger.total;
    ledger.buckets.push_back(std::move(bucket));
  }
  ledger.goodput = ledger.Find("productive")->share;
  ledger.notes.push_back("a profiling window of a few steps: the job's time outside them (start-up, checkpoints, "
                         "evaluation) needs step markers over the whole run (gputriage record)");
  return ledger;
}

RunLedger BuildMetricLedger(const std::vector<DeviceMetricAnalysis>& devices, const LedgerGpus& gpus) {
  RunLedger ledger;
  if (!(gpus.gpus > 0)) return ledger;
  bool any_instance = false;
  for (const auto& d : devices) any_instance = any_instance || d.mig_instance;
  // The same GPUs as JobGpus counts, each by its own span and board share.
  double total = 0, idle = 0, wall = 0;
  int64_t stretches = 0;
  for (const auto& d : devices) {
    if ((any_instance && d.mig_mode && !d.mig_instance) || d.job_use == "not_used" || !(d.hours > 0)) continue;
    const double share = d.mig_instance ? d.board_share : 1.0;
    total += d.hours * share;
    idle += std::min(d.hours, static_cast<double>(d.idle_phases.total_ns) / kNsPerS / 3600.0) * share;
    stretches += d.idle_phases.count;
    wall = std::max(wall, d.hours);
  }
  if (stretches == 0 || !(total > 0)) return ledger;  // nothing a metric log can tell apart
  ledger.valid = true;
  ledger.unit = "gpu_hours";
  ledger.gpus = gpus.gpus;
  ledger.gpus_source = gpus.source;
  ledger.wall_hours = wall;
  ledger.span_source = "each GPU's samples, first to last (plus one interval)";
  ledger.total = total;
  ledger.goodput = NAN;  // no steps: productive time is not known
  for (int b = 0; b < kNumBuckets; ++b) {
    LedgerBucket bucket;
    bucket.name = kBucketNames[b].name;
    bucket.group = kBucketNames[b].group;
    if (b == kIdle || b == kUnsplit) {
      bucket.hours = b == kIdle ? idle : total - idle;
      bucket.share = bucket.hours / total;
      bucket.count = b == kIdle ? stretches : 0;
      bucket.source = b == kIdle ? fmt::format("idle phases: stretches of at least {} s with the GPU at or below {}%",
                                               SeriesSketch::kIdleStretchMinNs / kNsPerS, SeriesSketch::kIdleStretchLevel)
                                 : "the time outside idle phases: without step markers it cannot be split into "
                                   "productive, data wait and the other buckets";
    } else {
      bucket.known = false;
      bucket.source = "a metric log has no steps or phases";
    }
    ledger.buckets.push_back(std::move(bucket));
  }
  ledger.notes.push_back("a metric log shows only its idle phases; step markers or a trace split the rest");
  return ledger;
}

void PriceLedger(RunLedger& ledger, double usd_per_gpu_hour, const std::string& source) {
  if (!ledger.valid || ledger.unit != "gpu_hours" || !(usd_per_gpu_hour > 0)) return;
  ledger.price_per_gpu_hour = usd_per_gpu_hour;
  ledger.price_source = source;
  for (auto& b : ledger.buckets)
    if (b.known) b.dollars = b.hours * usd_per_gpu_hour;
}

}  // namespace gputriage::analysis
