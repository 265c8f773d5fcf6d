// libFuzzer target: any bytes through the Kineto importer and the full analysis.
// Must never crash, hang or trip a sanitizer; errors are values.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gputriage/diagnosis.h"
#include "gputriage/import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto rec = gputriage::ImportKinetoTraceFromMemory(
      "fuzz.json", std::string_view(reinterpret_cast<const char*>(data), size));
  if (!rec.ok()) return 0;
  gputriage::Run run;
  run.recordings.push_back(std::move(*rec));
  (void)gputriage::Diagnose(run);
  return 0;
}
