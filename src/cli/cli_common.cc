#include "src/cli/cli_common.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "src/store/run_history.h"
#include "src/util/output_path.h"
#include "src/util/strings.h"
#include "src/util/text_encoding.h"
#include "src/verdicts/compare.h"
#include "src/verdicts/history.h"

namespace gputriage::cli {

CLI::Validator FiniteRange(double lo, double hi, bool above_lo) {
  return CLI::Validator(
      [lo, hi, above_lo](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end == text.c_str() || *end != '\0') return "must be a number, not '" + text + "'";
        if (!std::isfinite(v)) return "must be a finite number, not '" + text + "'";
        if (v < lo || v > hi || (above_lo && v <= lo))
          return fmt::format("must be {} {:g} and at most {:g}, not {}", above_lo ? "above" : "at least", lo, hi, text);
        return std::string();
      },
      fmt::format("NUMBER in {}{:g}, {:g}]", above_lo ? "(" : "[", lo, hi));
}

CLI::Validator RunIdNumber() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        bool digits = !text.empty() && text.size() <= 18;
        for (char c : text) digits = digits && c >= '0' && c <= '9';
        if (!digits || std::strtoll(text.c_str(), nullptr, 10) < 1)
          return "must be a run id (a whole number from 1; gputriage runs lists them), not '" + text + "'";
        return std::string();
      },
      "RUN_ID");
}

std::optional<int64_t> AsRunId(const std::string& argument) {
  int64_t id = 0;
  std::error_code ec;
  const auto [end, err] = std::from_chars(argument.data(), argument.data() + argument.size(), id);
  if (!argument.empty() && err == std::errc() && end == argument.data() + argument.size() && id >= 0 &&
      !std::filesystem::exists(argument, ec))
    return id;
  return std::nullopt;
}

bool ReachesFailOn(const Diagnosis& diagnosis, const std::string& level) {
  if (level == "none") return false;
  if (level == "regression")
    return std::any_of(diagnosis.findings.begin(), diagnosis.findings.end(),
                       [](const Finding& f) { return f.verdict == "regression"; });
  const Severity threshold = level == "high"       ? Severity::kHigh
                             : level == "moderate" ? Severity::kModerate
                             : level == "low"      ? Severity::kLow
                                                   : Severity::kInfo;
  return std::any_of(diagnosis.findings.begin(), diagnosis.findings.end(),
                     [&](const Finding& f) { return f.severity >= threshold; });
}

const std::vector<std::string>& WorkloadChoices() {
  static const std::vector<std::string> choices = {"unspecified", "dense-transformer", "cnn", "moe",
                                                   "rl",          "multimodal",        "inference"};
  return choices;
}

void AddSamplingOptions(CLI::App& app, SamplingArgs& args, const std::string& exporter_note) {
  auto* nvml = app.add_option("--nvml-library", args.nvml_library,
                              "NVML library to load (default: $GPUTRIAGE_NVML_LIBRARY, then libnvidia-ml.so.1)");
  app.add_option("--dcgm-exporter", args.dcgm_exporter_url,
                 "sample a local dcgm-exporter (e.g. http://127.0.0.1:9400/metrics) instead of NVML" + exporter_note)
      ->excludes(nvml);
  app.add_option("--interval", args.interval_s, fmt::format("seconds between samples (default {:g})", args.interval_s))
      ->check(FiniteRange(0.01, 3600.0));
  app.add_option("--window", args.window_s, fmt::format("seconds of history each verdict is about (default {:g})", args.window_s))
      ->check(FiniteRange(1.0, 86400.0));
  app.add_option("--judge-every", args.judge_every_s, fmt::format("seconds between verdicts (default {:g})", args.judge_every_s))
      ->check(FiniteRange(0.1, 3600.0));
  app.add_option("--workload", args.workload, "workload class the targets are judged against")
      ->check(CLI::IsMember(WorkloadChoices()));
  app.add_option("--price-per-gpu-hour", args.price_per_gpu_hour, "USD per GPU-hour (default: the dated price table)")
      ->check(FiniteRange(0.0, 1e6));
}

AgentOptions ToAgentOptions(const SamplingArgs& args) {
  AgentOptions options;
  options.nvml_library = args.nvml_library;
  options.dcgm_exporter_url = args.dcgm_exporter_url;
  options.interval_ns = static_cast<TimeNs>(std::llround(args.interval_s * 1e9));
  options.window_ns = static_cast<TimeNs>(std::llround(args.window_s * 1e9));
  options.judge_every_ns = static_cast<TimeNs>(std::llround(args.judge_every_s * 1e9));
  options.workload = *ParseWorkloadClass(args.workload);
  options.price_per_gpu_hour = args.price_per_gpu_hour;
  return options;
}

void Print(const std::string& out) { std::fwrite(out.data(), 1, out.size(), stdout); }

void PrintText(const std::string& out, std::FILE* stream) {
  const std::string text = ForTextEncoding(out, TerminalTextEncoding());
  std::fwrite(text.data(), 1, text.size(), stream);
}

Status CheckOutputWritable(const std::string& path) {
  if (path == "-" || WrittenInPlace(path)) return Status::Ok();
  struct stat st {};
  if (stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return InvalidArgumentError(fmt::format("{}: is a directory, not a file to write the report to", path));
  const std::string probe = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::Ok();
}

Status WriteOutputFile(const std::string& path, const std::string& content) {
  if (path == "-") {
    Print(content);
    return Status::Ok();
  }
  if (WrittenInPlace(path)) {  // a device or a FIFO: written into, never replaced
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return IoError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
    const bool written = std::fwrite(content.data(), 1, content.size(), f) == content.size();
    if (std::fclose(f) != 0 || !written) return IoError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
    return Status::Ok();
  }
  // Beside the target, then renamed over it: a reader (a browser reloading the
  // report) never sees half a file, and a failed write leaves the old one.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return IoError(fmt::format("{}: cannot write: {}", path, std::strerror(errno)));
  const bool written = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  const int write_errno = errno;
  if (std::fclose(f) != 0 || !written) {
    std::remove(tmp.c_str());
    return IoError(fmt::format("{}: cannot write: {}", path, std::strerror(written ? errno : write_errno)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    return IoError(fmt::format("{}: cannot write: {}", path, std::strerror(e)));
  }
  return Status::Ok();
}

void ReloadWebConfig(const std::string& path, const char* who,
                     const std::function<Status(std::shared_ptr<const WebConfig>)>& apply) {
  if (path.empty()) {
    std::fprintf(stderr, "%s: SIGHUP received: no --web-config-file to read again, nothing changed\n", who);
    return;
  }
  auto config = LoadWebConfig(path);
  Status applied = config.ok() ? apply(std::make_shared<const WebConfig>(std::move(*config))) : config.status();
  if (applied.ok()) {
    std::fprintf(stderr, "%s: SIGHUP received: %s read again and in use\n", who, Printable(path).c_str());
  } else {
    std::fprintf(stderr, "%s: SIGHUP received: %s not used, the previous configuration stays: %s\n", who,
                 Printable(path).c_str(), Printable(applied.message()).c_str());
  }
  std::fflush(stderr);
}

void PrintError(const Status& status) {
  // Messages quote file names and input text: printed so they cannot steer the terminal.
  // The message alone: a status code ("not_found:") means nothing to a user; the exit
  // code carries the class.
  PrintText("gputriage: error: " + Printable(status.message()) + "\n", stderr);
}

std::unique_ptr<RunStore> OpenStoreForRecording(const std::string& path, Status* why) {
  auto store = RunStore::Open(path.empty() ? RunStore::DefaultPath() : path);
  if (!store.ok()) {
    *why = store.status();
    return nullptr;
  }
  return std::move(*store);
}

std::unique_ptr<RunStore> OpenStoreForReading(const std::string& path) {
  auto store = RunStore::OpenForReading(path.empty() ? RunStore::DefaultPath() : path);
  if (!store.ok()) {
    PrintError(store.status());
    return nullptr;
  }
  return std::move(*store);
}

}  // namespace gputriage::cli
