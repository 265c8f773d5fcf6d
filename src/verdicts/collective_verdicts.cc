// Cross-rank verdicts: who the ranks of a run wait for at each collective
// (src/analysis/collective_skew.cc measures it).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "gputriage/diagnosis.h"
#include "src/analysis/what_if.h"
#include "src/verdicts/verdicts_internal.h"

namespace gputriage {
namespace {

// The gap one late rank alone opens, as a share of the step: below 5 % the
// lateness is not what holds the step (kMinWorthwhileGainPercent in verdicts.cc).
constexpr double kStragglerModeratePercent = 5.0;
constexpr double kStragglerHighPercent = 15.0;
// Waiting that moves between ranks: the mean rank's wait as a share of the step.
constexpr double kImbalanceModeratePercent = 10.0;
constexpr double kImbalanceHighPercent = 25.0;
// Steps needed to call lateness persistent: with fewer, the late rank is named
// (the others waited for it) but a one-off delay cannot be told from a slow rank.
constexpr double kPersistentMinSteps = 3;


const char* CauseText(const std::string& cause) {
  if (cause == "compute") return "running GPU kernels (more work, or a slower GPU)";
  if (cause == "data_wait") return "waiting for its DataLoader";
  if (cause == "host") return "on the host with the GPU idle (Python, launches, synchronisations, contention)";
  return "on nothing the trace separates";
}

/// The fixed run is another run: the range widens by this run's step-time
/// variation (at most kMaxRunToRunNoise), as the replayed gains' ranges do.
ExpectedGain SkewGain(const CollectiveSkew& s, double point_saving, std::string basis) {
  const double noise = std::min(s.step_cv, analysis::kMaxRunToRunNoise);
  const double best = (s.step_ms - std::max(point_saving, s.wait_ms_per_step)) * (1.0 - noise);
  const double worst = (s.step_ms - point_saving / 2) * (1.0 + noise);
  if (noise > 0) basis += fmt::format("; the range widened by the step-time CV ({:.1f}%) for run-to-run variation", noise * 100);
  return StepGain(s.step_ms, s.step_ms - point_saving, best, std::min(worst, s.step_ms * (1.0 + noise)),
                  "collective_transfer", std::move(basis));
}

void AddSkewEvidence(Finding& f, const CollectiveSkew& s) {
  f.evidence.push_back(E("collective_wait_ms_per_step", s.wait_ms_per_step, "ms",
                         "mean over ranks: inside collectives, from its own arrival to the last rank's"));
  f.evidence.push_back(E("collective_transfer_ms_per_step", s.transfer_ms_per_step, "ms",
                         "mean over ranks: the rest of its collective time"));
  f.evidence.push_back(E("collectives_matched", static_cast<double>(s.collectives), "count",
                         fmt::format("{}: the k-th of each kind on each of {} ranks", s.events, s.ranks)));
  f.evidence.push_back(E("collective_end_spread_us_p50", s.end_spread_us_p50, "us",
                         fmt::format("clock check: collectives end together on aligned clocks (starts spread {:.0f} µs)",
                                     s.start_spread_us_p50),
                         std::max(100.0, 0.5 * s.start_spread_us_p50), "<="));
}

}  // namespace

std::vector<Finding> JudgeCollectiveSkew(const CollectiveSkew& s, const std::vector<Finding*>& run_findings) {
  std::vector<Finding> out;
  if (!s.available || s.step_ms <= 0) return out;
  const double comm_ms = s.wait_ms_per_step + s.transfer_ms_per_step;
  const double wait_share_of_comm = Percent(s.wait_ms_per_step, comm_ms);
  // communication_bound on these ranks: how much of it is waiting, not moving bytes.
  for (Finding* finding : run_findings) {
    Finding& f = *finding;
    if (f.verdict != "communication_bound") continue;
    AddSkewEvidence(f, s);
    f.evidence.push_back(E("collective_wait_percent_of_collective_time", wait_share_of_comm, "percent",
                           "waiting for the last arrival / collective time, mean over ranks"));
    if (wait_share_of_comm >= 50.0)
      f.detail += fmt::format(
          " {:.0f}% of the collective time is ranks waiting for the last one to arrive, {:.1f} ms per step of transfer "
          "against {:.1f} ms of waiting: a faster interconnect would not remove it{}.",
          wait_share_of_comm, s.transfer_ms_per_step, s.wait_ms_per_step,
          s.persistent ? fmt::format(" (rank {} is late, see straggler_rank)", s.straggler_rank) : "");
  }
  const RankArrivals* top = nullptr;
  for (const auto& r : s.by_rank)
    if (r.rank == s.straggler_rank) top = &r;
  if (s.persistent && top) {
    const double saving_pct = Percent(s.saving_ms_per_step, s.step_ms);
    if (saving_pct < kStragglerModeratePercent) return out;
    Finding f;
    f.verdict = "straggler_rank";
    f.origin = "trace";
    f.rank = top->rank;
    f.recording = top->recording;
    f.severity = saving_pct >= kStragglerHighPercent ? Severity::kHigh : Severity::kModerate;
    f.title = fmt::format("Straggler: rank {} enters {:.0f}% of the collectives last, {:.2f} ms after the median rank; "
                          "the others wait for it",
                          top->rank, 100.0 * top->late_share, top->lateness_ms_mean);
    f.detail = fmt::format(
        "Across {} ranks and {} matched collectives ({}), rank {} is the last to arrive in {:.0f}% of those with a "
        "late rank and in {:.0f}% of the steps: the lateness stays with it. Every other rank's collective kernel runs "
        "from its own arrival until rank {}'s, so their communication time is mostly waiting ({:.1f} ms of wait against "
        "{:.1f} ms of transfer per step, mean over ranks). Before a late arrival, rank {} spent {:+.2f} ms on GPU "
        "compute, {:+.2f} ms waiting for data and {:+.2f} ms on the host against the median other rank: it was {}.",
        s.ranks, s.collectives, s.events, top->rank, 100.0 * top->late_share, 100.0 * s.straggler_step_share,
        top->rank, s.wait_ms_per_step, s.transfer_ms_per_step, top->rank, top->excess_compute_ms,
        top->excess_data_wait_ms, top->excess_host_ms, CauseText(s.cause));
    f.scope = fmt::format("ranks of the run ({})", s.ranks);
    if (s.steps < kPersistentMinSteps) {
      // One or two profiled steps: who was late is measured, that it lasts is not.
      f.severity = std::min(f.severity, Severity::kModerate);
      f.detail += fmt::format(" The trace holds {:.0f} profiled step{}: whether rank {} is late every step or was "
                              "delayed once cannot be told from it.",
                              s.steps, s.steps == 1 ? "" : "s", top->rank);
      f.cannot_exclude.push_back("a one-off delay (a single step's lateness)");
      f.to_separate = fmt::format("profile at least {:.0f} steps on every rank (schedule(active=...))",
                                  kPersistentMinSteps);
    }
    f.evidence.push_back(E("profiled_steps", s.steps, "count", "steps per rank the skew was measured over",
                           kPersistentMinSteps, ">="));
    f.evidence.push_back(E("straggler_late_share", 100.0 * top->late_share, "percent",
                           "collectives this rank entered last, of those with a late rank", 60.0, ">="));
    f.evidence.push_back(E("straggler_step_share", 100.0 * s.straggler_step_share, "percent",
                           "steps in which its summed lateness was the largest", 60.0, ">="));
    f.evidence.push_back(E("straggler_chance", s.straggler_chance, "probability",
                           "that some rank is last this often when lateness falls on any rank alike (binomial "
                           "tail at 1/ranks, times the ranks)", 0.05, "<"));
    f.evidence.push_back(E("straggler_lateness_ms", top->lateness_ms_mean, "ms",
                           "its arrival after the median rank's, mean over the collectives it entered last"));
    f.evidence.push_back(E("straggler_gap_percent_of_step", saving_pct, "percent",
                           "the gap it alone opens (its arrival − the next-latest rank's) per step / step time",
                           f.severity == Severity::kHigh ? kStragglerHighPercent : kStragglerModeratePercent, ">="));
    f.evidence.push_back(E("excess_compute_ms", top->excess_compute_ms, "ms",
                           "before a late arrival: its GPU kernel time − the median other rank's, same stretch"));
    f.evidence.push_back(E("excess_data_wait_ms", top->excess_data_wait_ms, "ms", "same, DataLoader time"));
    f.evidence.push_back(E("excess_host_ms", top->excess_host_ms, "ms", "same, the rest (host)"));
    AddSkewEvidence(f, s);
    if (s.cause == "compute")
      f.recommendations.push_back({"compare this rank's GPU with the others: clocks and throttle reasons "
                                   "(nvidia-smi -q -d PERFORMANCE,CLOCK), temperature, ECC/XID errors",
                                   "the same kernels run longer on a throttled or faulty GPU"});
    if (s.cause == "compute" || s.cause == "unclear")
      f.recommendations.push_back({"give every rank the same work: balanced sequence lengths, bucketed batches, "
                                   "even pipeline stages or expert load",
                                   "a rank with more tokens computes longer"});
    if (s.cause == "data_wait")
      f.recommendations.push_back({"fix this rank's input pipeline: DataLoader workers on its node, local cache, "
                                   "the shard it reads",
                                   "its batches arrive late"});
    if (s.cause == "host" || s.cause == "unclear")
      f.recommendations.push_back({"check this rank's host: other processes, CPU affinity (numactl / taskset), "
                                   "Python garbage collection (gc.freeze / gc.disable in the loop)",
                                   "host work that only this rank does delays its launches"});
    // Point: the late rank arrives with the next-latest, removing the gap it alone
    // opens. Best: every rank's wait goes (perfect balance). Worst: half the gap.
    f.gain = SkewGain(s, s.saving_ms_per_step,
                      fmt::format("rank {} arriving with the next-latest rank removes the {:.2f} ms per step it alone "
                                  "adds; at best all {:.2f} ms of waiting goes; at worst half the gap",
                                  top->rank, s.saving_ms_per_step, s.wait_ms_per_step));
    out.push_back(std::move(f));
    return out;
  }
  // No rank is persistently last: the wait moves between ranks.
  const double wait_pct = Percent(s.wait_ms_per_step, s.step_ms);
  if (s.with_late_rank == 0 || wait_pct < kImbalanceModeratePercent) return out;
  Finding f;
  f.verdict = "load_imbalance";
  f.origin = "trace";
  f.severity = wait_pct >= kImbalanceHighPercent ? Severity::kHigh : Severity::kModerate;
  // Severity follows the gain: waiting that balancing would barely shorten (the
  // late arrivals only just behind the next-latest) is not what holds the step.
  if (Percent(s.saving_ms_per_step, s.step_ms) < kStragglerModeratePercent) f.severity = Severity::kLow;
  f.recording = s.by_rank.empty() ? -1 : s.by_rank.front().recording;
  f.scope = fmt::format("ranks of the run ({})", s.ranks);
  f.title = fmt::format("Load imbalance: ranks wait {:.1f} ms per step ({:.0f}%) inside collectives for a late rank, "
                        "and the late rank changes",
                        s.wait_ms_per_step, wait_pct);
  std::string shares;
  for (const auto& r : s.by_rank)
    if (r.late > 0) shares += fmt::format("{}rank {} {:.0f}%", shares.empty() ? "" : ", ", r.rank, 100.0 * r.late_share);
  f.detail = fmt::format(
      "Across {} ranks and {} matched collectives ({}), {} had one rank arriving late; the last arrival is spread "
      "over ranks ({}): no single straggler, the work per step varies between ranks.",
      s.ranks, s.collectives, s.events, s.with_late_rank, shares);
  f.evidence.push_back(E("collective_wait_percent_of_step", wait_pct, "percent",
                         "mean over ranks: waiting inside collectives / step time",
                         f.severity == Severity::kHigh ? kImbalanceHighPercent : kImbalanceModeratePercent, ">="));
  f.evidence.push_back(E("top_late_share", 100.0 * s.straggler_late_share, "percent",
                         fmt::format("rank {}: the rank most often last", s.straggler_rank), 60.0, "<"));
  AddSkewEvidence(f, s);
  f.recommendations = {
      {"balance the work per rank: sort/bucket sequences by length, pack samples to a fixed token count",
       "uneven batches make a different rank late each step"},
      {"overlap the collectives with compute (DDP bucketing, FSDP prefetch) so arrival jitter is absorbed",
       "waiting hidden behind compute costs nothing"},
  };
  // Point: each late arrival brought to the next-latest rank's (the gap a late rank
  // alone opens); best: all the waiting goes (equal work per rank); worst: half the gap.
  f.gain = SkewGain(s, s.saving_ms_per_step,
                    fmt::format("each late arrival at the next-latest rank's removes {:.2f} ms per step; at best all "
                                "{:.2f} ms of waiting goes; at worst half the gap",
                                s.saving_ms_per_step, s.wait_ms_per_step));
  out.push_back(std::move(f));
  return out;
}

}  // namespace gputriage
