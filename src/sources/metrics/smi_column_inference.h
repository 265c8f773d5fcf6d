// Headerless nvidia-smi --query-gpu logs (--format=csv,noheader[,nounits]) and the
// scripts that print rows of the same shape: which field each column holds, read
// from the values alone, with every assumption said.
//
// What the values tell (nvidia-smi's own formatting; `--help-query-gpu`):
//   - units, where logged: "%" (utilization.gpu, then utilization.memory, in the
//     order --query-gpu lists them), "MiB" (memory), "W" (power), "MHz" (clocks);
//   - a date-time, or a 10-digit number that only grows: the timestamp (Unix time);
//   - text: "GPU-…" a uuid, "00000000:07:00.0" a PCI bus id, "535.104.05" the
//     driver, a board name; "0x…" the clock-event reasons bitmask;
//   - integers 0..K-1 cycling row by row: the GPU index;
//   - without units: a constant ≥ 4096 with another integer column never above it
//     is memory.total (MiB) and memory.used; numbers written with decimals are
//     power (nvidia-smi prints watts with two; nothing else it prints has any).
// What stays ambiguous (integers 0-100: utilization, temperature or fan speed, in
// a log without units) is named, never guessed.
#pragma once

#include <string>
#include <vector>

namespace gputriage {

struct InferredSmiColumns {
  /// Per column, the nvidia-smi field it is read as ("" where none).
  std::vector<std::string> fields;
  /// The assumptions made, one sentence each, for the report.
  std::vector<std::string> assumptions;
  /// Whether any column holds a GPU reading gputriage can use.
  bool gpu_data = false;
  /// Whether the rows are nvidia-smi's own even where no reading is certain yet: a
  /// timestamp beside a GPU index, uuid or bus id (more rows may tell the rest).
  bool nvidia_smi_shape = false;
  /// When not: what the rows are, for the error ("3 numeric columns without units, …").
  std::string what;
};

/// `rows`: the log's first rows, split on commas and trimmed, all of one width.
/// `known`: per column, a field a script's own header already named ("" where
/// it named none), or empty when the log has no header at all.
InferredSmiColumns InferSmiColumns(const std::vector<std::vector<std::string>>& rows,
                                   const std::vector<std::string>& known);

}  // namespace gputriage
