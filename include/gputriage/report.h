// Outputs of a diagnosis: the terminal report and the versioned JSON document.
#pragma once

#include <string>

#include "gputriage/diagnosis.h"

namespace gputriage {

/// Version of the JSON document (docs/json-schema.md). Bumped on any breaking change.
constexpr int kReportSchemaVersion = 1;

struct TerminalOptions {
  bool color = false;        // ANSI colours (the CLI enables them only on a TTY)
  int max_kernels = 10;      // rows of the kernel table
};

/// Human-readable report: verdicts first, then evidence, then fixes, then the numbers.
std::string RenderTerminal(const Run& run, const Diagnosis& diagnosis, const TerminalOptions& options);

/// The JSON document; `indent` < 0 for one line.
std::string RenderJson(const Run& run, const Diagnosis& diagnosis, int indent = 2);

}  // namespace gputriage
