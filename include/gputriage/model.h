// The canonical model every source feeds: trace files today, metric logs, NVML
// recordings and step markers later. Analyses read only this model, never a format.
//
// Times are int64 nanoseconds since the Unix epoch where the source gives an
// absolute clock, else since the source's own zero (`Recording::clock_is_absolute`).
#pragma once

#include <algorithm>
#include <cmath>
#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gputriage/metrics.h"

namespace gputriage {

using TimeNs = int64_t;
constexpr TimeNs kNsPerUs = 1000;
constexpr TimeNs kNsPerMs = 1000 * 1000;
constexpr TimeNs kNsPerS = 1000 * 1000 * 1000;

/// Nanoseconds as fractional milliseconds, for reports.
inline double ToMs(TimeNs ns) { return static_cast<double>(ns) / 1e6; }

/// A half-open time interval [start, end) in nanoseconds.
struct Interval {
  TimeNs start = 0;
  TimeNs end = 0;
  TimeNs duration() const { return end - start; }
  bool operator==(const Interval&) const = default;
};

/// Interned strings: kernel names repeat thousands of times and are long (C++
/// template signatures), so events hold a 32-bit id instead of a copy.
using NameId = uint32_t;
constexpr NameId kNoName = 0;  // id 0 is the empty string

class StringTable {
 public:
  StringTable();
  StringTable(const StringTable&) = delete;
  StringTable& operator=(const StringTable&) = delete;
  StringTable(StringTable&&) = default;
  StringTable& operator=(StringTable&&) = default;

  NameId Intern(std::string_view text);
  std::string_view View(NameId id) const { return strings_[id]; }
  size_t size() const { return strings_.size(); }

 private:
  // Stable storage (deque never moves elements) so the index can key on views.
  std::deque<std::string> strings_;
  std::unordered_map<std::string_view, NameId> index_;
};

enum class Vendor { kUnknown, kNvidia, kAmd, kIntel, kMeta };
const char* VendorName(Vendor vendor);

/// One accelerator as the source describes it (Kineto `deviceProperties`).
struct Device {
  int id = -1;
  std::string name;  // marketing name, e.g. "Tesla V100-DGXS-32GB"
  Vendor vendor = Vendor::kUnknown;
  int compute_major = -1;  // CUDA compute capability (NVIDIA) or gfx major (AMD)
  int compute_minor = -1;
  int num_sms = 0;  // streaming multiprocessors / compute units
  int64_t total_memory_bytes = 0;
  int max_threads_per_sm = 0;
  int warp_size = 0;
  int regs_per_sm = 0;
  int shared_memory_per_sm_bytes = 0;
};

enum class MemoryOpKind { kMemcpyHtoD, kMemcpyDtoH, kMemcpyDtoD, kMemcpyHtoH, kMemcpyPtoP,
                          kMemcpyOther, kMemset };
const char* MemoryOpKindName(MemoryOpKind kind);

constexpr float kNotRecorded = std::numeric_limits<float>::quiet_NaN();

/// A kernel execution on a device.
struct KernelActivity {
  Interval time;
  NameId name = kNoName;
  int32_t device = -1;
  int32_t stream = -1;
  int64_t correlation = -1;  // joins the launching runtime call
  int64_t external_id = -1;  // joins the CPU operator that launched it
  uint32_t grid[3] = {0, 0, 0};
  uint32_t block[3] = {0, 0, 0};
  int32_t registers_per_thread = -1;
  int32_t shared_memory_bytes = -1;
  float blocks_per_sm = kNotRecorded;  // grid blocks / SM count (Kineto)
  float warps_per_sm = kNotRecorded;
  float est_occupancy_percent = kNotRecorded;  // Kineto "est. achieved occupancy %"
  NameId collective = kNoName;  // NCCL "Collective name" when the trace has it
};

/// A memcpy or memset executed by a device's copy/compute engines.
/// The host side of a host-device copy: pageable memory is staged through a
/// driver buffer and blocks the host; pinned memory can be copied asynchronously.
enum class HostMemory : int8_t { kUnknown, kPageable, kPinned };

struct MemoryActivity {
  Interval time;
  MemoryOpKind kind = MemoryOpKind::kMemcpyOther;
  HostMemory host_memory = HostMemory::kUnknown;  // for HtoD / DtoH, where the source says
  int32_t device = -1;
  int32_t stream = -1;
  int64_t correlation = -1;
  int64_t external_id = -1;
  int64_t bytes = -1;
};

// kCaptureBegin/kCaptureEnd: a stream's capture into a CUDA/HIP graph begins or
// ends; launches between them on the thread record graph nodes and run nothing.
enum class RuntimeCallKind { kKernelLaunch, kGraphLaunch, kMemcpy, kMemset, kSynchronize, kCaptureBegin, kCaptureEnd, kOther };
/// What a CUDA/HIP runtime or driver call does, from its name: every source
/// (Kineto traces, Nsight Systems exports) classifies calls alike.
RuntimeCallKind RuntimeCallKindOfName(std::string_view name);

/// A host call into the CUDA/HIP runtime or driver API.
struct RuntimeCall {
  Interval time;
  NameId name = kNoName;
  int64_t thread = -1;
  int64_t correlation = -1;
  int64_t external_id = -1;
  RuntimeCallKind kind = RuntimeCallKind::kOther;
  bool driver_api = false;  // cu* (driver) rather than cuda* (runtime)
};

enum class CpuSpanKind {
  kOperator,        // aten:: and other framework ops
  kUserAnnotation,  // record_function ranges
  kPython,          // "python" category (not python_function stacks)
  kDataLoader,      // enumerate(DataLoader)#...__next__ / enumerate(DataPipe)#...
  kCommunication,   // nccl:* / gloo:* collective ops on the host
};

/// A host-side span on a CPU thread.
struct CpuSpan {
  Interval time;
  NameId name = kNoName;
  int64_t thread = -1;
  int64_t external_id = -1;
  CpuSpanKind kind = CpuSpanKind::kOperator;
  NameId first_input_type = kNoName;  // e.g. "float", "c10::BFloat16"
  double flops = -1;                   // profiler with_flops estimate, -1 if absent
};

/// The input shapes of a matrix operator (record_shapes=True): GEMM and
/// convolution operators only, for tensor-core tile alignment.
struct MatrixOpShapes {
  static constexpr int kMaxInputs = 3;
  static constexpr int kMaxRank = 5;
  int64_t external_id = -1;  // joins the kernels it launched
  NameId name = kNoName;     // "aten::addmm"
  NameId dtype = kNoName;    // the first input's type ("c10::BFloat16")
  uint8_t inputs = 0;        // input shapes kept
  std::array<uint8_t, kMaxInputs> rank{};  // 0: not a plain tensor (or rank over kMaxRank)
  std::array<std::array<int64_t, kMaxRank>, kMaxInputs> dims{};
};

/// One point of a memory curve: the bytes allocated and reserved just after an
/// allocation or a free (reserved -1 where the trace does not say).
struct MemoryPoint {
  TimeNs t = 0;
  int64_t allocated = 0;
  int64_t reserved = -1;
};

/// Memory PyTorch's allocators held on one device over a trace ([memory] events,
/// profile_memory=True): the caching allocator's on a GPU, the CPU allocator's
/// on the host.
struct DeviceMemoryUse {
  static constexpr size_t kMaxCurvePoints = 2048;  // the curve kept: each bucket's lowest and highest point
  static constexpr size_t kMaxRawPoints = 1 << 22;  // per device while reading (about 100 MB); past it, every other dropped
  int device = -1;             // the CUDA device id (host: -1)
  bool host = false;           // "Device Type" 0: host memory
  int64_t peak_allocated = 0;  // bytes, the largest "Total Allocated" (or of the running sum, `relative`)
  int64_t peak_reserved = 0;   // bytes, the largest "Total Reserved" (-1: the trace does not say)
  TimeNs peak_at = 0;          // when allocated peaked (the first time)
  int64_t events = 0;
  // No totals in the trace (PyTorch before 1.10): allocated is the net sum of
  // the events' Bytes since the trace began (what was allocated before is not
  // in it; frees of it make the sum negative).
  bool relative = false;
  // Time-ordered. While reading: every event (thinned past kMaxRawPoints); once
  // read (FinishMemoryCurve): at most kMaxCurvePoints, the peak among them.
  std::vector<MemoryPoint> curve;
  int64_t thinned = 0;  // events left out of the raw points (a trace past kMaxRawPoints on one device)
};

/// An out-of-memory the caching allocator recorded (an allocator snapshot's "oom" entry).
struct OomRecord {
  TimeNs t = 0;
  int64_t requested_bytes = 0;    // the allocation that failed
  int64_t device_free_bytes = -1;  // what the device had free then (-1 unknown)
  std::string where;               // the innermost frame that asked, "file:line in function"
  int64_t allocated_bytes = -1;    // the allocator's levels just before it, replayed from the history
  int64_t reserved_bytes = -1;
};

/// One device's caching allocator at a snapshot (torch.cuda.memory._snapshot):
/// its segments and blocks, and the history it kept.
struct AllocatorState {
  int device = 0;
  int64_t segments = 0;
  int64_t reserved_bytes = 0;   // the segments' total size
  int64_t allocated_bytes = 0;  // their allocated size
  int64_t active_bytes = 0;
  int64_t requested_bytes = 0;  // what the allocations asked for (before rounding)
  std::map<std::string, std::pair<int64_t, int64_t>> blocks;  // state ("active_allocated", "inactive", ...): count, bytes
  std::map<std::string, int64_t> actions;  // history entries by action (alloc, free_completed, segment_alloc, oom, ...)
  std::vector<OomRecord> ooms;
};

/// Sorts a device's raw points, turns Bytes into a running sum where the trace
/// has no totals, finds the peak and decimates the curve (src/analysis/memory_curve.cc).
void FinishMemoryCurve(DeviceMemoryUse& use);

/// A device-side synchronization record (Kineto `cuda_sync`: event/stream waits).
struct SyncActivity {
  Interval time;
  NameId name = kNoName;
  int32_t device = -1;
  int32_t stream = -1;
};

/// A call into the OS runtime (an OS runtime trace: nsys --trace=osrt, its
/// OSRT_API table) on a thread that launches GPU work: the thread was inside the
/// OS (waiting on a lock, a condition, a pipe, a file) for this span.
struct OsCall {
  Interval time;
  NameId name = kNoName;  // pthread_cond_wait, poll, read, ...
  int64_t thread = -1;
};

/// A CPU sample (nsys --sample=cpu, its COMPOSITE_EVENTS): a thread that launches
/// GPU work caught running at `time.start` (time.end the same), in `symbol` of
/// `module`, the innermost frame.
struct CpuSample {
  Interval time;
  NameId symbol = kNoName;
  NameId module = kNoName;  // the library or executable, as the sampler named it (a path)
  int64_t thread = -1;
};

/// One training/inference step as marked on the host (`ProfilerStep#N`).
struct Step {
  int64_t number = -1;
  Interval host;
};

/// A training step timed from inside the loop (step markers, gputriage/markers.h):
/// its span and the time of each named phase charged to it (index = gputriage_phase,
/// 1 = data wait; a batch fetched between steps is the next step's wait).
struct MarkedStep {
  int64_t number = 0;
  uint32_t pid = 0;
  Interval span;
  std::array<TimeNs, 9> phase_ns{};  // by StepPhaseSlot (markers.hpp): data .. other, copy
  int64_t samples = 0;
  int64_t tokens = 0;
  double flops = 0;
  TimeNs device_ns = 0;  // GPU time of the step as the job measured it on the device, 0 unknown
  // GPU time of the step's phases (CUDA events at their begin and end), by slot; 0 unknown.
  std::array<TimeNs, 9> phase_device_ns{};
  // Where a rank of a synchronous job meets its peers (wall ns; 0 when not marked).
  // Arrival: the step's first forward or communication begin, the first phase
  // that can hold a collective. Release: its last backward or communication end,
  // when DDP's all-reduce (inside backward) or an explicit collective has
  // returned on every rank: ranks that waited for a late one leave with it.
  TimeNs sync_arrival = 0;
  TimeNs sync_release = 0;
  // Memory at the step's end, where the job sampled it (zero-code mode and
  // watch(), docs/memory.md); 0 where the step was not sampled. The host's
  // resident set and its high-water mark; on the GPU the process used most
  // (memory_device, -1 none), the caching allocator's allocated bytes, their
  // peak since the process started, its reserved bytes, and its retries and
  // out-of-memory errors so far.
  int64_t host_rss_bytes = 0;
  int64_t host_rss_peak_bytes = 0;
  int memory_device = -1;
  int64_t device_allocated_bytes = 0;
  int64_t device_peak_bytes = 0;
  int64_t device_reserved_bytes = 0;
  int64_t alloc_retries = 0;
  int64_t alloc_ooms = 0;
  bool memory_sampled() const { return host_rss_bytes > 0 || memory_device >= 0; }
  TimeNs data_wait_ns() const { return phase_ns[1]; }
  /// Forward and backward or the optimizer marked: the rest of the step is
  /// measured (docs/phases.md).
  bool phases_traced() const;
  /// The time of every marked phase, summed.
  TimeNs marked_phases_ns() const;
  /// The span outside every marked phase; none when phases marked on other
  /// threads overlap the loop's (their sum can pass the span), never negative.
  TimeNs untraced_ns() const { return std::max<TimeNs>(0, span.duration() - marked_phases_ns()); }
};

/// Who a process of a recorded job was in a distributed run: what it told the
/// recorder (torch.distributed, once initialised) or its environment said
/// (RANK/LOCAL_RANK/WORLD_SIZE as torchrun sets them, Slurm's, Open MPI's).
struct ProcessRank {
  uint32_t pid = 0;
  int rank = -1;        // -1 unknown
  int local_rank = -1;
  int world_size = -1;
  std::string host;     // "" unknown
  std::string source;   // "torch.distributed", "RANK", "SLURM_PROCID", ...
};

/// A named phase of the job outside its training steps, from step markers:
/// checkpoint saves and restores, evaluation, compilation (gputriage_phase).
/// What the goodput ledger (src/analysis/ledger.h) charges that time to.
struct RunPhase {
  uint16_t phase = 0;
  uint32_t pid = 0;
  Interval span;
};

enum class IssueSeverity { kInfo, kWarning, kError };

/// A problem met while importing: counted by kind, never fatal on its own.
struct ImportIssue {
  IssueSeverity severity = IssueSeverity::kWarning;
  std::string kind;     // stable id, e.g. "bad_event", "truncated"
  std::string message;  // first occurrence, with position
  int64_t count = 0;
};

struct ImportStats {
  int64_t bytes_read = 0;       // uncompressed bytes consumed
  int64_t events_seen = 0;      // complete trace events parsed
  int64_t events_used = 0;      // events that fed the model
  int64_t python_function_events = 0;  // Python stack events: counted, not stored
  bool truncated = false;       // the file ended before its JSON closed
  std::string truncation_note;  // what was lost
  std::vector<ImportIssue> issues;

  void AddIssue(IssueSeverity severity, std::string_view kind, std::string message);
  const ImportIssue* FindIssue(std::string_view kind) const;
};

struct EventStreams;  // src/model/event_streams.h

struct RecordingAnalysis;  // gputriage/diagnosis.h

/// Everything one source file (one rank / process) recorded.
struct Recording {
  std::string source_path;
  std::string format;  // "kineto", "nsys", "nvidia-smi-csv", "nvidia-smi-q", "nvidia-smi-table", "nvidia-smi-dmon", "dcgmi-dmon", "dcgm-exporter"
  int rank = -1;
  int world_size = -1;
  /// The host process's OS id where the source says (a Kineto trace's CPU events,
  /// an nsys export's process): two profilers' views of one process share it.
  int64_t host_pid = -1;
  std::string comm_backend;  // "nccl", "gloo", ...
  bool clock_is_absolute = true;
  std::vector<Device> devices;
  StringTable names;

  std::vector<KernelActivity> kernels;
  std::vector<MemoryActivity> memory_ops;
  std::vector<RuntimeCall> runtime_calls;
  std::vector<CpuSpan> cpu_spans;
  std::vector<SyncActivity> syncs;
  std::vector<OsCall> os_calls;  // an OS runtime trace's calls, where the source has one
  /// The source traced OS runtime calls (an empty os_calls then means none were made).
  bool os_calls_traced = false;
  std::vector<CpuSample> cpu_samples;  // a CPU sampler's samples, where the source has them
  bool cpu_sampled = false;
  std::vector<MatrixOpShapes> matrix_shapes;  // record_shapes traces
  std::vector<DeviceMemoryUse> memory_use;     // profile_memory traces and allocator snapshots, per device
  std::vector<AllocatorState> allocator_states;  // allocator snapshots, per device
  std::vector<Step> steps;
  std::vector<MarkedStep> marked_steps;  // from step markers (gputriage record)
  std::vector<RunPhase> run_phases;      // step markers' phases outside steps (checkpoint, eval, ...)
  std::vector<ProcessRank> process_ranks;  // the marked processes' ranks, where known
  /// A live recording's job: when it started and ended (wall ns; empty when the
  /// source does not say) and how it ended (the shell convention: 128 + signal).
  Interval job_span;
  std::optional<int> exit_code;
  /// A trace read past its memory budget keeps its events here, time-ordered and
  /// partly in a scratch file, and the eight event vectors above stay empty; the
  /// analyses read either through src/analysis/trace_events.h. Times in the
  /// streams are before `streams_shift` (the trace's base time) is added.
  std::shared_ptr<const EventStreams> streams;
  TimeNs streams_shift = 0;
  MetricSet metrics;  // sampled GPU metrics (nvidia-smi, dmon, dcgmi, dcgm-exporter)
  Interval profiler_window;  // the "PyTorch Profiler (0)" span, if recorded
  std::map<std::string, std::string> metadata;

  ImportStats stats;
  /// Set when the recording was analysed as soon as it was read and its events
  /// then dropped (the ranks of a run, a few read at a time, so memory holds
  /// summaries, not every rank's events): Diagnose takes this analysis as it is.
  std::shared_ptr<const RecordingAnalysis> analysis;

  const Device* FindDevice(int id) const;
};

/// Says in the recording's issues which metric values were rejected as impossible
/// (MetricSet::Plausible), one issue per metric with the count and the first value.
void ReportRejectedValues(Recording& recording);

/// After a live recording (and when a stored one is loaded): keeps the GPUs the
/// job's process tree used, when NVML could tell, and says as import issues
/// which GPUs were left out and which were shared with other processes.
void AttributeGpusToJob(Recording& recording);

/// Whether recordings of `format` (Recording::format) are event traces: a
/// profiler trace or an Nsight Systems export, read and judged alike.
inline bool IsTraceFormat(std::string_view format) { return format == "kineto" || format == "nsys"; }

/// A run: one or more recordings of the same job (e.g. one trace per rank).
struct Run {
  std::vector<Recording> recordings;
};

}  // namespace gputriage
