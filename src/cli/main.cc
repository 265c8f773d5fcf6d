// gputriage command line: a thin layer over import → analysis → verdicts → report.
// CLI11 is used only here; its exceptions stay inside this file.
//
// Exit codes (docs/cli.md):
//   0  the diagnosis was printed (and no finding reached --fail-on)
//   1  a finding reached the --fail-on severity
//   2  usage error (bad flag or value)
//   3  an input could not be read (missing, unreadable, not a trace, corrupt)
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "gputriage/diagnosis.h"
#include "gputriage/import.h"
#include "gputriage/report.h"
#include "gputriage/version.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFindings = 1;
constexpr int kExitUsage = 2;
constexpr int kExitInput = 3;

int RunDiagnose(const std::vector<std::string>& files, bool json, const std::string& color,
                const std::string& fail_on, int kernels) {
  auto run = gputriage::ImportRun(files);
  if (!run.ok()) {
    std::fprintf(stderr, "gputriage: error: %s\n", run.status().ToString().c_str());
    return kExitInput;
  }
  const gputriage::Diagnosis diagnosis = gputriage::Diagnose(*run);
  if (json) {
    std::string out = gputriage::RenderJson(*run, diagnosis);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fputc('\n', stdout);
  } else {
    gputriage::TerminalOptions options;
    options.color = color == "always" || (color == "auto" && isatty(fileno(stdout)));
    options.max_kernels = kernels;
    std::string out = gputriage::RenderTerminal(*run, diagnosis, options);
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  for (const auto& r : run->recordings)
    if (r.stats.truncated)
      std::fprintf(stderr, "gputriage: warning: %s: %s\n", r.source_path.c_str(), r.stats.truncation_note.c_str());
  if (fail_on != "none") {
    const gputriage::Severity threshold = fail_on == "high"       ? gputriage::Severity::kHigh
                                          : fail_on == "moderate" ? gputriage::Severity::kModerate
                                          : fail_on == "low"      ? gputriage::Severity::kLow
                                                                  : gputriage::Severity::kInfo;
    for (const auto& f : diagnosis.findings)
      if (f.severity >= threshold) return kExitFindings;
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gputriage: why your GPUs sit idle, with the evidence, the fix and the gain"};
  app.set_version_flag("--version", std::string("gputriage ") + gputriage::kGputriageVersion);
  app.require_subcommand(1);

  auto* diagnose = app.add_subcommand("diagnose", "Diagnose PyTorch profiler (Kineto) traces; several files = ranks of one run");
  std::vector<std::string> files;
  bool json = false;
  std::string color = "auto";
  std::string fail_on = "none";
  int kernels = 10;
  diagnose->add_option("FILE", files, "trace files (.json or .json.gz)")->required();
  diagnose->add_flag("--json", json, "print the versioned JSON report (docs/json-schema.md)");
  diagnose->add_option("--color", color, "colour the terminal report: auto (on a TTY), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  diagnose->add_option("--fail-on", fail_on, "exit 1 when a finding has at least this severity")
      ->check(CLI::IsMember({"none", "info", "low", "moderate", "high"}));
  diagnose->add_option("--kernels", kernels, "rows of the kernel table")->check(CLI::Range(0, 1000));

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? kExitOk : kExitUsage;
  }
  if (diagnose->parsed()) return RunDiagnose(files, json, color, fail_on, kernels);
  return kExitUsage;
}
