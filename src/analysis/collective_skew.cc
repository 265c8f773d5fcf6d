// A synchronising collective (all-reduce, all-gather, reduce-scatter, all-to-all)
// cannot finish on any rank before the last rank has entered it: every rank's
// collective kernel runs from its own arrival until shortly after the last
// arrival plus the transfer. So on aligned clocks the ends line up while the
// starts spread, and a rank's collective time splits into waiting (last arrival −
// own arrival) and transfer (the rest). HTA's straggler analysis and TraceLens's
// NCCL "implicit sync" and straggler_summary tables read traces the same way.
//
// The ends lining up is also the check that the clocks are aligned and that the
// k-th collective of one kind is the same collective on every rank: where the ends
// spread as much as the starts, nothing is concluded.
#include "src/analysis/collective_skew.h"
#include "src/analysis/trace_events.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <string>

#include <fmt/format.h>

#include "src/analysis/analysis_internal.h"
#include "src/analysis/intervals.h"
#include "src/analysis/kernel_taxonomy.h"
#include "src/util/strings.h"

namespace gputriage::analysis {
namespace {

// A rank is late at a collective when it enters this long after the median rank:
// at least 20 µs (launch jitter, clock alignment of a few µs) and a quarter of
// the collective's shortest time on any rank (its transfer).
constexpr TimeNs kLateFloorNs = 20 * kNsPerUs;
constexpr double kLateShareOfTransfer = 0.25;
// Clocks are taken as aligned when the collectives' ends spread at most half as
// much as their starts (median over collectives), or under 100 µs.
constexpr double kAlignedEndSpreadUs = 100;
constexpr double kAlignedEndToStartSpread = 0.5;
// The same rank last in at least this share of the collectives with a late rank,
// and of the steps: a persistent straggler, not lateness that moves around.
constexpr double kPersistentShare = 0.6;
// ... and more often than chance would make some rank last: with two ranks, one of
// them is last in 3 of 5 late collectives half the time by jitter alone (the
// re-recorded no-stall control of the corpus). Persistence needs that chance under 5 %.
constexpr double kPersistentMaxChance = 0.05;

/// P(X >= k) for X ~ Binomial(n, p).
double BinomialTail(int64_t k, int64_t n, double p) {
  if (k <= 0) return 1.0;
  if (k > n) return 0.0;
  double tail = 0;
  for (int64_t i = k; i <= n; ++i)
    tail += std::exp(std::lgamma(static_cast<double>(n) + 1) - std::lgamma(static_cast<double>(i) + 1) -
                     std::lgamma(static_cast<double>(n - i) + 1) + static_cast<double>(i) * std::log(p) +
                     static_cast<double>(n - i) * std::log1p(-p));
  return std::min(1.0, tail);
}

/// Coverage of the union of what `next()` gives (in order of start) before each
/// of `at` times: C(t) = covered time in (-inf, t), so C(b) - C(a) is the covered
/// time of [a, b). One pass, whatever the number of intervals.
template <typename Next>
std::vector<TimeNs> CoverageBefore(Next&& next, const std::vector<TimeNs>& at) {
  std::vector<size_t> order(at.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return at[x] < at[y]; });
  std::vector<TimeNs> out(at.size(), 0);
  size_t q = 0;
  TimeNs done = 0;  // length of the merged intervals already passed
  auto emit = [&](Interval iv) {
    for (; q < order.size() && at[order[q]] < iv.start; ++q) out[order[q]] = done;
    for (; q < order.size() && at[order[q]] < iv.end; ++q) out[order[q]] = done + (at[order[q]] - iv.start);
    done += iv.duration();
  };
  UnionBuilder merged;
  for (const Interval* iv = next(); iv != nullptr; iv = next()) merged.Add(*iv, emit);
  merged.Finish(emit);
  for (; q < order.size(); ++q) out[order[q]] = done;
  return out;
}

/// The stretch before each call: from the previous call's end to its start.
std::vector<TimeNs> Boundaries(const std::vector<CollectiveCall>& calls) {
  std::vector<TimeNs> at;
  for (size_t e = 1; e < calls.size(); ++e) at.push_back(calls[e - 1].time.end), at.push_back(calls[e].time.start);
  return at;
}

/// What a rank did over the stretch before call e: GPU compute, DataLoader wait,
/// the rest on the host (ms).
std::array<double, 3> Activity(const std::vector<CollectiveCall>& calls, size_t e) {
  std::array<double, 3> out{};
  const TimeNs len_ns = calls[e].time.start - calls[e - 1].time.end;
  if (len_ns <= 0) return out;
  const double len = static_cast<double>(len_ns);
  const double compute = static_cast<double>(calls[e].compute_before_ns);
  const double data = std::min(static_cast<double>(calls[e].data_wait_before_ns), len - compute);
  out[0] = compute / 1e6;
  out[1] = std::max(0.0, data) / 1e6;
  out[2] = std::max(0.0, len - compute - std::max(0.0, data)) / 1e6;
  return out;
}

/// One rank's calls of the list the run is judged on, indexed by kind.
struct RankEvents {
  const std::vector<CollectiveCall>* calls = nullptr;
  std::map<std::string_view, std::vector<size_t>> by_kind;  // indices into calls
  intervals::List steps;  // its step windows, merged
};

RankEvents Index(const RankTrace& t, bool device_events) {
  RankEvents out;
  out.calls = device_events ? &t.analysis->collectives.device : &t.analysis->collectives.host;
  for (size_t i = 0; i < out.calls->size(); ++i) out.by_kind[(*out.calls)[i].kind].push_back(i);
  std::vector<Interval> windows;
  for (const auto& s : t.analysis->steps) windows.push_back(s.window);
  out.steps = intervals::Merge(std::move(windows));
  return out;
}

bool InSteps(const intervals::List& steps, TimeNs t) {
  if (steps.empty()) return true;  // no steps: the whole trace
  return intervals::OverlapWith(steps, {t, t + 1}) > 0;
}

double MedianOf(std::vector<double> v) { return Median(v); }

/// The k-th unnamed SendRecv kernel is the k-th host all-to-all call's, where the
/// counts agree (one grouped kernel per call); where they do not (pipeline
/// send/receive beside them, a call cut by the trace's window) none is taken, as
/// a point-to-point transfer holds no rank but its peer.
void AddSendRecvAllToAlls(const std::vector<CollectiveCall>& host, std::vector<Interval> sendrecv,
                          std::vector<CollectiveCall>& device) {
  size_t calls = 0;
  for (const auto& h : host) calls += h.kind == "all_to_all" ? 1 : 0;
  if (calls == 0 || calls != sendrecv.size()) return;
  std::sort(sendrecv.begin(), sendrecv.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
  for (const Interval& k : sendrecv) device.push_back({k, "all_to_all"});
}

}  // namespace

std::string_view SynchronisingCollective(std::string_view name) {
  const std::string l = AsciiLower(name);
  if (Contains(l, "sendrecv") || Contains(l, "send") || Contains(l, "recv") || Contains(l, "broadcast") ||
      Contains(l, "bcast"))
    return "";
  if (Contains(l, "allreduce") || Contains(l, "all_reduce")) return "all_reduce";
  if (Contains(l, "allgather") || Contains(l, "all_gather")) return "all_gather";
  if (Contains(l, "reducescatter") || Contains(l, "reduce_scatter")) return "reduce_scatter";
  if (Contains(l, "alltoall") || Contains(l, "all_to_all")) return "all_to_all";
  if (Contains(l, "barrier")) return "barrier";
  return "";
}

StatusOr<RankCollectives> GatherRankCollectives(const TraceEvents& events, int primary_device, const KindByName& kinds) {
  RankCollectives out;
  const Recording& rec = events.recording();
  const auto is_communication = [&kinds](NameId name) { return kinds.at(name).cls == KernelClass::kCommunication; };
  const auto on_device = [primary_device](const KernelActivity& k) { return primary_device < 0 || k.device == primary_device; };
  // NCCL runs all-to-all as grouped send/receive: its kernel is named SendRecv, and
  // a trace without "Collective name" on kernels (Kineto before 2024) only says
  // which it was on the host. Those kernels are matched to the rank's host
  // all-to-all calls below, in order.
  std::vector<Interval> unnamed_sendrecv;
  {
    auto kernels = events.kernels();
    for (const KernelActivity* k = kernels.Next(); k != nullptr; k = kernels.Next()) {
      if (!on_device(*k) || !is_communication(k->name)) continue;
      const std::string_view kind = SynchronisingCollective(rec.names.View(k->collective != kNoName ? k->collective : k->name));
      if (!kind.empty()) out.device.push_back({k->time, kind});
      else if (k->collective == kNoName && Contains(AsciiLower(rec.names.View(k->name)), "sendrecv"))
        unnamed_sendrecv.push_back(k->time);
    }
    RETURN_IF_ERROR(kernels.status());
  }
  {
    // Host spans (gloo, or a trace without device activity): the outermost span
    // of each collective call, in start order (the stream's), the outermost first.
    std::map<int64_t, TimeNs> open_until;  // per thread: the end of the outermost span seen
    auto spans = events.cpu_spans();
    for (const CpuSpan* c = spans.Next(); c != nullptr; c = spans.Next()) {
      if (c->kind != CpuSpanKind::kCommunication) continue;
      TimeNs& until = open_until[c->thread];
      if (c->time.start < until) continue;  // nested inside a collective already taken
      until = c->time.end;
      const std::string_view kind = SynchronisingCollective(rec.names.View(c->name));
      if (!kind.empty()) out.host.push_back({c->time, kind});
    }
    RETURN_IF_ERROR(spans.status());
  }
  const auto by_start = [](const CollectiveCall& a, const CollectiveCall& b) { return a.time.start < b.time.start; };
  std::stable_sort(out.host.begin(), out.host.end(), by_start);
  AddSendRecvAllToAlls(out.host, std::move(unnamed_sendrecv), out.device);
  std::stable_sort(out.device.begin(), out.device.end(), by_start);
  // What each rank did between its calls, for the late rank's "before arriving".
  std::vector<TimeNs> at = Boundaries(out.device);
  const size_t device_points = at.size();
  for (TimeNs t : Boundaries(out.host)) at.push_back(t);
  auto kernels = events.kernels();
  const std::vector<TimeNs> compute = CoverageBefore(
      [&]() -> const Interval* {
        for (const KernelActivity* k = kernels.Next(); k != nullptr; k = kernels.Next())
          if (on_device(*k) && !is_communication(k->name)) return &k->time;
        return nullptr;
      },
      at);
  RETURN_IF_ERROR(kernels.status());
  auto spans = events.cpu_spans();
  const std::vector<TimeNs> data = CoverageBefore(
      [&]() -> const Interval* {
        for (const CpuSpan* c = spans.Next(); c != nullptr; c = spans.Next())
          if (c->kind == CpuSpanKind::kDataLoader) return &c->time;
        return nullptr;
      },
      at);
  RETURN_IF_ERROR(spans.status());
  const auto fill = [&](std::vector<CollectiveCall>& calls, size_t first_point) {
    for (size_t e = 1; e < calls.size(); ++e) {
      const size_t p = first_point + 2 * (e - 1);
      calls[e].compute_before_ns = std::max<TimeNs>(0, compute[p + 1] - compute[p]);
      calls[e].data_wait_before_ns = std::max<TimeNs>(0, data[p + 1] - data[p]);
    }
  };
  fill(out.device, 0);
  fill(out.host, device_points);
  out.gathered = true;
  return out;
}

CollectiveSkew MeasureCollectiveSkew(const std::vector<RankTrace>& ranks) {
  CollectiveSkew out;
  out.ranks = static_cast<int>(ranks.size());
  if (ranks.size() < 2) return out;
  bool device_events = true;
  for (const auto& t : ranks) device_events = device_events && t.analysis->has_gpu_activity;
  // Host spans where a rank has no device collectives at all (CPU ranks, gloo).
  if (device_events && std::any_of(ranks.begin(), ranks.end(), [](const RankTrace& t) {
        return t.analysis->collectives.device.empty();
      }))
    device_events = false;
  std::vector<RankEvents> per;
  for (const auto& t : ranks) per.push_back(Index(t, device_events));
  out.events = device_events ? "device collective kernels" : "host collective spans";
  for (const auto& r : per)
    if (r.calls->empty()) {
      out.unavailable_reason = "a rank recorded no all-reduce, all-gather, reduce-scatter, all-to-all or barrier";
      return out;
    }

  // Match the k-th collective of each kind across ranks.
  struct Instance {
    std::vector<size_t> event;  // per rank, index into its events
  };
  std::vector<Instance> instances;
  std::vector<std::string> skipped;
  for (const auto& [kind, first] : per.front().by_kind) {
    size_t n = first.size(), most = first.size();
    for (const auto& r : per) {
      auto it = r.by_kind.find(kind);
      const size_t count = it == r.by_kind.end() ? 0 : it->second.size();
      n = std::min(n, count);
      most = std::max(most, count);
    }
    // Counts that differ are collectives the profiler window cut differently on
    // each rank, or different collectives: the k-th ones would not be the same.
    if (n == 0 || most > n + n / 10 + 1) {
      skipped.push_back(std::string(kind));
      continue;
    }
    for (size_t k = 0; k < n; ++k) {
      Instance inst;
      bool in_steps = true;
      for (const auto& r : per) {
        const size_t e = r.by_kind.at(kind)[k];
        inst.event.push_back(e);
        in_steps = in_steps && InSteps(r.steps, (*r.calls)[e].time.start);
      }
      if (in_steps) instances.push_back(std::move(inst));
    }
  }
  if (instances.empty()) {
    out.unavailable_reason = skipped.empty() ? "no collective ran on every rank inside the steps"
                                             : "collective counts differ between ranks (" + Join(skipped, ", ") + ")";
    return out;
  }
  out.collectives = static_cast<int64_t>(instances.size());

  // Aligned clocks: ends together, starts spread.
  std::vector<double> end_spread, start_spread;
  for (const auto& inst : instances) {
    TimeNs s0 = INT64_MAX, s1 = INT64_MIN, e0 = INT64_MAX, e1 = INT64_MIN;
    for (size_t r = 0; r < per.size(); ++r) {
      const Interval t = (*per[r].calls)[inst.event[r]].time;
      s0 = std::min(s0, t.start), s1 = std::max(s1, t.start), e0 = std::min(e0, t.end), e1 = std::max(e1, t.end);
    }
    start_spread.push_back(static_cast<double>(s1 - s0) / 1e3);
    end_spread.push_back(static_cast<double>(e1 - e0) / 1e3);
  }
  out.end_spread_us_p50 = MedianOf(end_spread);
  out.start_spread_us_p50 = MedianOf(start_spread);
  if (out.end_spread_us_p50 > kAlignedEndSpreadUs &&
      out.end_spread_us_p50 > kAlignedEndToStartSpread * out.start_spread_us_p50) {
    out.unavailable_reason = fmt::format(
        "the matched collectives end {:.0f} µs apart across ranks (median) while starting {:.0f} µs apart: the "
        "clocks are not aligned, or these are not the same collectives on every rank",
        out.end_spread_us_p50, out.start_spread_us_p50);
    return out;
  }
  out.available = true;

  // Steps: per rank, for per-step figures.
  double steps = 0, step_ms = 0;
  for (const auto& t : ranks) {
    steps += std::max<double>(1.0, static_cast<double>(t.analysis->steps.size()));
    step_ms += ToMs(t.analysis->avg_step_ns);
  }
  out.steps = steps / static_cast<double>(ranks.size());
  out.step_ms = step_ms / static_cast<double>(ranks.size());
  {
    double sum = 0, sq = 0, n_steps = 0;
    for (const auto& t : ranks)
      for (const auto& st : t.analysis->steps) {
        const double ms = ToMs(st.total());
        sum += ms, sq += ms * ms, ++n_steps;
      }
    if (n_steps >= 2 && sum > 0) {
      const double mean = sum / n_steps;
      out.step_cv = std::sqrt(std::max(0.0, sq / n_steps - mean * mean)) / mean;
    }
  }

  const size_t n = per.size();
  std::vector<RankArrivals> by_rank(n);
  for (size_t r = 0; r < n; ++r) by_rank[r].rank = ranks[r].recording->rank, by_rank[r].recording = ranks[r].index;
  std::vector<double> wait_ms(n, 0), transfer_ms(n, 0), late_ms(n, 0);
  std::vector<std::array<double, 3>> excess(n, std::array<double, 3>{});
  // Which rank was latest on aggregate, per step of the first rank.
  std::map<size_t, std::vector<double>> lateness_by_step;
  const auto& first_steps = ranks.front().analysis->steps;
  for (const auto& inst : instances) {
    std::vector<TimeNs> starts(n);
    TimeNs shortest = INT64_MAX;
    for (size_t r = 0; r < n; ++r) {
      const Interval t = (*per[r].calls)[inst.event[r]].time;
      starts[r] = t.start;
      shortest = std::min(shortest, t.duration());
    }
    const size_t last = static_cast<size_t>(std::max_element(starts.begin(), starts.end()) - starts.begin());
    const TimeNs last_start = starts[last];
    for (size_t r = 0; r < n; ++r) {
      const Interval t = (*per[r].calls)[inst.event[r]].time;
      const TimeNs wait = std::clamp<TimeNs>(last_start - t.start, 0, t.duration());
      wait_ms[r] += ToMs(wait);
      transfer_ms[r] += ToMs(t.duration() - wait);
    }
    std::vector<TimeNs> sorted = starts;
    std::sort(sorted.begin(), sorted.end());
    const TimeNs median = sorted[(n - 1) / 2];
    const TimeNs lateness = last_start - median;
    const TimeNs margin = std::max<TimeNs>(kLateFloorNs, static_cast<TimeNs>(kLateShareOfTransfer * static_cast<double>(shortest)));
    if (lateness < margin) continue;
    ++out.with_late_rank;
    ++by_rank[last].late;
    late_ms[last] += ToMs(lateness);
    // What it alone cost the others: the gap to the next-latest arrival.
    out.saving_ms_per_step += ToMs(last_start - sorted[n - 2]);
    if (!first_steps.empty()) {
      const TimeNs at = (*per.front().calls)[inst.event.front()].time.start;
      for (size_t s = 0; s < first_steps.size(); ++s)
        if (at >= first_steps[s].window.start && at < first_steps[s].window.end) {
          auto& v = lateness_by_step[s];
          v.resize(n, 0.0);
          v[last] += ToMs(lateness);
          break;
        }
    }
    // Before arriving: from its previous collective's end to this one's start, on
    // every rank; the late rank's activity against the others' median.
    std::vector<std::array<double, 3>> act(n);
    bool windows = true;
    for (size_t r = 0; r < n; ++r) {
      const size_t e = inst.event[r];
      if (e == 0) {
        windows = false;
        break;
      }
      act[r] = Activity(*per[r].calls, e);
    }
    if (!windows) continue;
    for (int c = 0; c < 3; ++c) {
      std::vector<double> others;
      for (size_t r = 0; r < n; ++r)
        if (r != last) others.push_back(act[r][static_cast<size_t>(c)]);
      excess[last][static_cast<size_t>(c)] += act[last][static_cast<size_t>(c)] - MedianOf(others);
    }
  }
  for (size_t r = 0; r < n; ++r) {
    auto& a = by_rank[r];
    a.wait_ms_per_step = wait_ms[r] / out.steps;
    a.transfer_ms_per_step = transfer_ms[r] / out.steps;
    if (out.with_late_rank > 0) a.late_share = static_cast<double>(a.late) / static_cast<double>(out.with_late_rank);
    if (a.late > 0) {
      const double k = static_cast<double>(a.late);
      a.lateness_ms_mean = late_ms[r] / k;
      a.excess_compute_ms = excess[r][0] / k;
      a.excess_data_wait_ms = excess[r][1] / k;
      a.excess_host_ms = excess[r][2] / k;
    }
    out.wait_ms_per_step += a.wait_ms_per_step / static_cast<double>(n);
    out.transfer_ms_per_step += a.transfer_ms_per_step / static_cast<double>(n);
  }
  out.saving_ms_per_step /= out.steps;
  if (out.with_late_rank > 0) {
    const auto top = std::max_element(by_rank.begin(), by_rank.end(),
                                      [](const RankArrivals& x, const RankArrivals& y) { return x.late < y.late; });
    out.straggler_rank = top->rank;
    out.straggler_late_share = top->late_share;
    const size_t s = static_cast<size_t>(top - by_rank.begin());
    if (!lateness_by_step.empty()) {
      int led = 0;
      for (const auto& [step, v] : lateness_by_step)
        if (static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin()) == s) ++led;
      out.straggler_step_share = static_cast<double>(led) / static_cast<double>(lateness_by_step.size());
    } else {
      out.straggler_step_share = top->late_share;
    }
    const double rank_count = static_cast<double>(by_rank.size());
    out.straggler_chance = std::min(1.0, rank_count * BinomialTail(top->late, out.with_late_rank, 1.0 / rank_count));
    out.persistent = top->late_share >= kPersistentShare && out.straggler_step_share >= kPersistentShare &&
                     out.straggler_chance < kPersistentMaxChance;
    const double c = top->excess_compute_ms, d = top->excess_data_wait_ms, h = top->excess_host_ms;
    const double most = std::max({c, d, h});
    out.cause = most <= 0 ? "unclear" : most == c ? "compute" : most == d ? "data_wait" : "host";
  }
  out.by_rank = std::move(by_rank);
  return out;
}

}  // namespace gputriage::analysis
