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

/// "$22,000" (whole dollars from 1,000 up, else cents); "n/a" for NaN.
std::string FormatUsd(double usd);

/// One what-if row as a sentence: "40% → 75%: +87% more compute for the same spend, ...".
std::string WhatIfLine(const WhatIf& w);

struct JsonOptions {
  int indent = 2;         // < 0 for one line
  int max_kernels = -1;   // rows of each recording's kernel table; -1 all the analysis kept (15)
};

/// The JSON document; `indent` < 0 for one line.
std::string RenderJson(const Run& run, const Diagnosis& diagnosis, int indent = 2);
std::string RenderJson(const Run& run, const Diagnosis& diagnosis, const JsonOptions& options);

struct HtmlOptions {
  std::string title;  // shown in the page's heading and tab; the sources when empty
};

/// One self-contained HTML file: the verdicts as cards with their evidence, fix
/// and expected gain, then the charts that show them (uPlot and the report's
/// own script are inside the file; it opens offline and requests nothing).
std::string RenderHtml(const Run& run, const Diagnosis& diagnosis, const HtmlOptions& options = {});

}  // namespace gputriage
