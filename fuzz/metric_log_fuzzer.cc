// libFuzzer targets for the metric-log readers: one binary per format (the
// format is fixed at build time by GPUTRIAGE_FUZZ_FORMAT, "auto" for detection),
// each running the bytes through the reader, the analysis, the verdicts and both
// reports. Must never crash, hang or trip a sanitizer; errors are values.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gputriage/diagnosis.h"
#include "gputriage/import.h"
#include "gputriage/report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gputriage::ImportOptions options;
  options.format = GPUTRIAGE_FUZZ_FORMAT;
  auto recs = gputriage::ImportMetricLogFromMemory("fuzz.log", std::string_view(reinterpret_cast<const char*>(data), size),
                                                    options);
  if (!recs.ok()) return 0;
  gputriage::Run run;
  run.recordings = std::move(*recs);
  gputriage::DiagnoseOptions diagnose;
  diagnose.price_per_gpu_hour = 2.5;
  diagnose.monthly_spend = 1000;
  const auto d = gputriage::Diagnose(run, diagnose);
  (void)gputriage::RenderJson(run, d);
  (void)gputriage::RenderTerminal(run, d, {});
  return 0;
}
