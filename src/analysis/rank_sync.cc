// Ranks of a synchronous job against each other, from step markers: in data-
// parallel training every rank waits at the step's collectives for the last one
// to arrive, so the straggler is the rank that arrives late, and the time the
// others spend inside backward (DDP's all-reduce) or a collective is waiting for
// it, not their own work. Measured where every judged process marked the same
// step number with both sync times (MarkedStep::sync_arrival / sync_release),
// on one clock (one host; ranks on several hosts need their clocks aligned).
#include "src/analysis/rank_sync.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "src/analysis/analysis_internal.h"

namespace gputriage {
namespace {

constexpr int64_t kMinMatchedSteps = 3;
// Arrivals closer than this are one arrival: scheduling noise, not a straggler.
constexpr double kMinArrivalSpreadMs = 1.0;
// Ranks that leave a collective together (releases within this share of how far
// apart they arrived) waited for each other; independent processes leave as far
// apart as they arrived.
constexpr double kAlignedReleaseFraction = 0.25;

double SyncMs(TimeNs ns) { return static_cast<double>(ns) / 1e6; }

/// One process's steps by number (those with both sync times), the first of each number.
std::map<int64_t, const MarkedStep*> SyncedSteps(const std::vector<const MarkedStep*>& steps) {
  std::map<int64_t, const MarkedStep*> out;
  for (const MarkedStep* s : steps)
    if (s->sync_arrival > 0 && s->sync_release > 0) out.emplace(s->number, s);
  return out;
}

/// Per process: lateness, waiting, arriving last and where the lateness came from, over the matched steps.
struct Accumulated {
  std::vector<double> late, waited;
  int64_t last = 0;
  int64_t late_steps = 0;
  double start = 0, data = 0, host = 0;
};

void AddStep(const std::vector<const MarkedStep*>& at, std::vector<Accumulated>& acc, std::vector<double>& arrival_spread,
             std::vector<double>& release_spread, std::vector<std::map<int64_t, double>>& waited) {
  size_t first = 0;
  TimeNs last_arrival = at[0]->sync_arrival, first_release = at[0]->sync_release, last_release = at[0]->sync_release;
  for (size_t p = 1; p < at.size(); ++p) {
    if (at[p]->sync_arrival < at[first]->sync_arrival) first = p;
    last_arrival = std::max(last_arrival, at[p]->sync_arrival);
    first_release = std::min(first_release, at[p]->sync_release);
    last_release = std::max(last_release, at[p]->sync_release);
  }
  const MarkedStep& e = *at[first];
  arrival_spread.push_back(SyncMs(last_arrival - e.sync_arrival));
  release_spread.push_back(SyncMs(last_release - first_release));
  const auto before_arrival = [](const MarkedStep& s) { return s.sync_arrival - s.span.start - s.data_wait_ns(); };
  for (size_t p = 0; p < at.size(); ++p) {
    const MarkedStep& s = *at[p];
    Accumulated& a = acc[p];
    a.late.push_back(SyncMs(s.sync_arrival - e.sync_arrival));
    a.waited.push_back(SyncMs(last_arrival - s.sync_arrival));
    waited[p][s.number] = a.waited.back();
    if (s.sync_arrival == last_arrival && p != first) ++a.last;
    if (s.sync_arrival == e.sync_arrival) continue;  // not late in this step
    // The three parts add up to its lateness against the first to arrive.
    ++a.late_steps;
    a.start += SyncMs(s.span.start - e.span.start);
    a.data += SyncMs(s.data_wait_ns() - e.data_wait_ns());
    a.host += SyncMs(before_arrival(s) - before_arrival(e));
  }
}

}  // namespace

RankSync MeasureRankSync(const std::vector<std::vector<const MarkedStep*>>& judged,
                         std::vector<ProcessStepStats>& processes, std::vector<std::map<int64_t, double>>& waited) {
  RankSync sync;
  waited.assign(judged.size(), {});
  if (judged.size() < 2 || judged.size() != processes.size()) return sync;
  std::vector<std::map<int64_t, const MarkedStep*>> by_number;
  for (const auto& steps : judged) by_number.push_back(SyncedSteps(steps));
  std::vector<Accumulated> acc(judged.size());
  std::vector<double> arrival_spread, release_spread;
  std::vector<const MarkedStep*> at(judged.size());
  for (const auto& [number, step] : by_number[0]) {
    bool everywhere = true;
    for (size_t p = 0; p < by_number.size() && everywhere; ++p) {
      const auto it = by_number[p].find(number);
      everywhere = it != by_number[p].end();
      if (everywhere) at[p] = it->second;
    }
    if (everywhere) AddStep(at, acc, arrival_spread, release_spread, waited);
  }
  sync.matched_steps = static_cast<int64_t>(arrival_spread.size());
  if (sync.matched_steps < kMinMatchedSteps) return sync;
  sync.arrival_spread_ms_p50 = analysis::Median(arrival_spread);
  sync.release_spread_ms_p50 = analysis::Median(release_spread);
  sync.synchronous = sync.arrival_spread_ms_p50 >= kMinArrivalSpreadMs &&
                     sync.release_spread_ms_p50 <= kAlignedReleaseFraction * sync.arrival_spread_ms_p50;
  const double matched = static_cast<double>(sync.matched_steps);
  for (size_t p = 0; p < processes.size(); ++p) {
    ProcessStepStats& s = processes[p];
    Accumulated& a = acc[p];
    s.late_ms_p50 = analysis::Median(a.late);
    s.waited_ms_p50 = analysis::Median(a.waited);
    s.last_share = static_cast<double>(a.last) / matched;
    if (a.late_steps > 0) {
      const double n = static_cast<double>(a.late_steps);
      s.late_start_ms = a.start / n;
      s.late_data_ms = a.data / n;
      s.late_host_ms = a.host / n;
    }
  }
  return sync;
}

}  // namespace gputriage
