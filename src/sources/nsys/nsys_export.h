// Nsight Systems reports as input: `nsys export --type sqlite` files, read into
// the same model a PyTorch profiler trace becomes (gputriage/model.h), so every
// verdict, gain and report applies unchanged (docs/formats.md, "Nsight Systems").
//
// The export's schema changes between nsys versions: tables and columns are
// read by name where they exist, and what a verdict needs but the export lacks
// is said as an import issue. One Recording per process with GPU work or
// CUDA calls (several processes: the ranks of a run).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gputriage/import.h"
#include "gputriage/model.h"
#include "gputriage/status.h"

namespace gputriage {

/// A SQLite database file's first bytes.
bool LooksLikeSqlite(std::string_view head);
/// An .nsys-rep (or older .qdrep) report's first bytes: nsys must export it first.
bool LooksLikeNsysReport(std::string_view head);

struct NsysReadOptions {
  /// NVTX ranges whose name matches this ECMAScript regex are the steps (empty:
  /// PyTorch's ProfilerStep#N, and Megatron/NeMo-style "iteration N"/"step N").
  std::string step_range_regex;
  /// Bytes of events held in memory while the export is read, shared by its
  /// processes; the rest is sorted through scratch files (ImportOptions').
  size_t memory_budget_bytes = kDefaultTraceMemoryBudget;
  /// Where scratch files go ("" = $TMPDIR, else /tmp).
  std::string scratch_directory;
};

/// Reads an `nsys export --type sqlite` file.
StatusOr<std::vector<Recording>> ImportNsysExport(const std::string& path, const NsysReadOptions& options = {});

/// The command that exports an .nsys-rep to SQLite.
std::string NsysExportCommand(const std::string& report_path);

/// Where to find nsys instead of PATH.
inline constexpr const char* kNsysPathEnv = "GPUTRIAGE_NSYS";

/// Reads an .nsys-rep (or .qdrep): exported with the user's own nsys
/// ($GPUTRIAGE_NSYS, else nsys on PATH) into a temporary SQLite file, read, and
/// removed. Without nsys, an error that gives the command to run where nsys is.
StatusOr<std::vector<Recording>> ImportNsysReport(const std::string& report_path, const NsysReadOptions& options = {});

}  // namespace gputriage
