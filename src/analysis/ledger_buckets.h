// The goodput ledger's buckets and the pieces both ledgers share: the one drawn
// for a finished recording (ledger.cc) and the one the agent keeps while a job
// runs (live_ledger.cc). Internal to src/analysis.
#pragma once

#include <vector>

#include "gputriage/model.h"

namespace gputriage::analysis::ledger_internal {

enum Bucket {
  kProductive,
  kDataWait,
  kCommunication,
  kHostStall,
  kBetweenSteps,
  kStartup,
  kCompileWarmup,
  kCheckpointRestore,
  kCheckpointSave,
  kEvaluation,
  kIdle,
  kTeardown,
  kHang,
  kCrash,
  kLostWork,
  // Only where there are no steps (a metric log, the agent on a job without
  // markers): the time outside idle phases, which no step splits.
  kUnsplit,
  kNumBuckets
};

struct BucketName {
  const char* name;
  const char* group;
};
inline constexpr BucketName kBucketNames[kNumBuckets] = {
    {"productive", "inside_steps"},        {"data_wait", "inside_steps"},
    {"communication", "inside_steps"},     {"host_stall", "inside_steps"},
    {"between_steps", "inside_steps"},     {"startup", "outside_steps"},
    {"compile_warmup", "outside_steps"},   {"checkpoint_restore", "outside_steps"},
    {"checkpoint_save", "outside_steps"},  {"evaluation", "outside_steps"},
    {"idle", "outside_steps"},             {"teardown", "outside_steps"},
    {"hang", "failures"},                  {"crash", "failures"},
    {"lost_work", "failures"},             {"unsplit", "no_steps"},
};

/// A job phase's bucket (-1: a phase inside steps, not the ledger's).
int PhaseBucket(uint16_t phase);
/// Its priority where phases overlap (higher wins): restore > compile > checkpoint > eval.
int PhasePriority(int bucket);

struct Segment {
  Interval span;
  int bucket;
};

/// The job phases as disjoint segments within `job`, the highest priority where they overlap.
std::vector<Segment> PhaseSegments(const std::vector<const RunPhase*>& phases, Interval job);

/// Time of `span` covered by the disjoint, sorted segments.
TimeNs Covered(const std::vector<Segment>& segments, Interval span);

/// The step's phases marked inside it (data, communication, checkpoint), scaled to
/// `visible` of its span and never more than it: {data, communication, checkpoint},
/// and the host's stall: with forward and backward or optimizer marked, the step
/// outside every marked phase -- where the GPU's own time for the step says what
/// of it left the GPU idle, that much; without a GPU (`no_gpu`), all of it; with
/// a GPU but no device time, none (a sync may have waited for queued GPU work).
struct InsidePhases {
  double data = 0, communication = 0, checkpoint = 0, host_stall = 0;
};
InsidePhases PhasesInside(const MarkedStep& step, TimeNs span_ns, TimeNs visible, bool no_gpu);

}  // namespace gputriage::analysis::ledger_internal
