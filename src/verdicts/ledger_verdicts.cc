// Findings that point into the goodput ledger (src/analysis/ledger.cc): time
// outside the steps that a cheap change wins back. Checkpoints that stop the
// job for a large share of its time (asynchronous saving, or saving less
// often), and evaluation that takes the training GPUs for a large share
// (evaluating less often, or elsewhere). The gain is the run's own: the
// bucket's measured time taken out of its total, as goodput.
#include <cmath>

#include <fmt/format.h>

#include "src/util/units.h"
#include "src/verdicts/verdicts_internal.h"

namespace gputriage {
namespace {

/// A bucket this share of the job's time or more is worth a finding.
constexpr double kCheckpointSharePercent = 5.0;
constexpr double kEvaluationSharePercent = 10.0;

Severity SeverityOf(double share_percent, double threshold) {
  if (share_percent >= 3 * threshold) return Severity::kHigh;
  if (share_percent >= 1.6 * threshold) return Severity::kModerate;
  return Severity::kLow;
}

/// The largest other badput bucket: what limits goodput once this one is gone.
std::string NextBucket(const RunLedger& l, const std::string& except) {
  const LedgerBucket* next = nullptr;
  for (const auto& b : l.buckets)
    if (b.known && b.name != except && b.name != "productive" && b.name != "unsplit" && b.hours > 0 &&
        (next == nullptr || b.hours > next->hours))
      next = &b;
  return next == nullptr ? "productive" : next->name;
}

/// Goodput once `saved` hours of the bucket are gone from the job's total.
double GoodputWithout(const RunLedger& l, double saved) {
  const LedgerBucket* p = l.Find("productive");
  const double total = l.total - saved;
  return p == nullptr || total <= 0 ? NAN : 100.0 * p->hours / total;
}

struct BucketRule {
  const char* bucket;
  const char* verdict;
  double threshold_percent;
};

}  // namespace

std::vector<Finding> JudgeLedger(const RecordingAnalysis& a) {
  std::vector<Finding> out;
  const RunLedger& l = a.ledger;
  // Goodput needs steps: a metric log's ledger has none to judge against.
  if (!l.valid || std::isnan(l.goodput) || !(l.total > 0)) return out;
  const bool gpu_hours = l.unit == "gpu_hours";
  auto amount = [&](double hours) { return gpu_hours ? FormatGpuTime(hours) : FormatSeconds(hours * 3600.0); };
  for (const BucketRule& rule : {BucketRule{"checkpoint_save", "checkpoint_overhead", kCheckpointSharePercent},
                                 BucketRule{"evaluation", "evaluation_overhead", kEvaluationSharePercent}}) {
    const LedgerBucket* b = l.Find(rule.bucket);
    if (b == nullptr || !b->known || b->count < 2) continue;  // one save or evaluation: no frequency to change
    const double share = 100.0 * b->share;
    if (share < rule.threshold_percent) continue;
    const bool checkpoint = std::string_view(rule.bucket) == "checkpoint_save";
    const double each_s = b->hours * 3600.0 / static_cast<double>(b->count) / std::max(l.gpus, 1.0);
    Finding f;
    f.verdict = rule.verdict;
    f.origin = "ledger";
    f.severity = SeverityOf(share, rule.threshold_percent);
    f.title = fmt::format("{} take {:.1f}% of the job's {} ({} times, {} each)", checkpoint ? "Checkpoint saves" : "Evaluations",
                          share, gpu_hours ? "GPU time" : "time", b->count, FormatSeconds(each_s));
    f.detail = checkpoint
                   ? "The job stops training while each checkpoint is written: the GPUs are paid for and idle. Saving "
                     "asynchronously overlaps the write with training; saving less often halves it at the cost of "
                     "more work lost on a crash."
                   : "The training GPUs evaluate for a large share of the job. Evaluating less often, on a sample of "
                     "the validation set, or in a separate job on cheaper GPUs gives that time back to training.";
    f.evidence.push_back(E(std::string(rule.bucket) + "_share_percent", share, "percent",
                           "goodput ledger: " + b->source, rule.threshold_percent, ">="));
    f.evidence.push_back(E(std::string(rule.bucket) + "_seconds", b->hours * 3600.0, "s",
                           gpu_hours ? "goodput ledger, GPU-seconds" : "goodput ledger, seconds of the job"));
    f.evidence.push_back(E(std::string(rule.bucket) + "_count", static_cast<double>(b->count), "count", "phases marked"));
    f.evidence.push_back(E("goodput_percent", 100.0 * l.goodput, "percent", "productive / total (goodput ledger)"));
    if (checkpoint) {
      f.recommendations.push_back(
          {"save asynchronously: torch.distributed.checkpoint.async_save(state_dict, checkpoint_id=path) (PyTorch 2.3+), "
           "or copy the state to CPU and write it from a background thread",
           fmt::format("each save holds the job for {} now; only the copy to host memory stays in the step", FormatSeconds(each_s))});
      f.recommendations.push_back(
          {"save half as often (every 2N steps instead of every N)",
           "halves the time saving takes; a crash then loses up to twice the steps"});
    } else {
      f.recommendations.push_back({"evaluate half as often, or on a fixed sample of the validation set",
                                   fmt::format("each evaluation holds the training GPUs for {}", FormatSeconds(each_s))});
      f.recommendations.push_back({"run evaluation in a separate job on the saved checkpoints (cheaper GPUs, or idle ones)",
                                   "the training job keeps its GPUs for training"});
    }
    // The range: half the bucket's time (half as often, exactly) to all of it
    // (asynchronous saving, or evaluation elsewhere: bounded by the time the
    // bucket holds now; what stays in the job, the copy to host memory, is not
    // timed by the markers). The point: the middle of that range.
    const double current = 100.0 * l.goodput;
    f.gain = LevelGain("goodput_percent", current, GoodputWithout(l, 0.75 * b->hours), GoodputWithout(l, b->hours),
                       GoodputWithout(l, 0.5 * b->hours), NextBucket(l, rule.bucket),
                       fmt::format("the job's measured {} ({}) taken out of its total: half of it when done half "
                                   "as often (the low end), all of it {} (the high end, bounded by the time it holds now); "
                                   "the point is the middle",
                                   rule.bucket, amount(b->hours),
                                   checkpoint ? "when saved asynchronously, less the copy to host memory the markers do not time"
                                              : "when evaluated elsewhere"));
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace gputriage
