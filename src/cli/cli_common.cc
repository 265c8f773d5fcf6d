#include "src/cli/cli_common.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include <fmt/format.h>

#include "src/util/strings.h"

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

const std::vector<std::string>& WorkloadChoices() {
  static const std::vector<std::string> choices = {"unspecified", "dense-transformer", "cnn", "moe",
                                                   "rl",          "multimodal",        "inference"};
  return choices;
}

void Print(const std::string& out) { std::fwrite(out.data(), 1, out.size(), stdout); }

void PrintError(const Status& status) {
  // Messages quote file names and input text: printed so they cannot steer the terminal.
  std::fprintf(stderr, "gputriage: error: %s\n", Printable(status.ToString()).c_str());
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
