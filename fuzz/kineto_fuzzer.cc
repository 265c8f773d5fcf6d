// libFuzzer target: any bytes through the Kineto importer and the full analysis.
// Must never crash, hang or trip a sanitizer; errors are values. It is also a
// differential check of the parallel reader: the same bytes read in small runs on
// two workers must give what reading them one event at a time gives (the
// splitter's run cutting and the run parser's strictness, kineto_reader.cc).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gputriage/diagnosis.h"
#include "gputriage/import.h"
#include "src/sources/kineto/kineto_reader.h"

namespace {

std::string Summary(const gputriage::StatusOr<gputriage::Recording>& r) {
  if (!r.ok()) return r.status().ToString();
  std::string s = std::to_string(r->kernels.size()) + " " + std::to_string(r->cpu_spans.size()) + " " +
                  std::to_string(r->runtime_calls.size()) + " " + std::to_string(r->memory_ops.size()) + " " +
                  std::to_string(r->steps.size()) + " " + std::to_string(r->stats.events_seen) + " " +
                  std::to_string(r->stats.events_used) + " " + std::to_string(r->stats.bytes_read) + " " +
                  r->stats.truncation_note;
  for (const auto& k : r->kernels) s += " " + std::to_string(k.time.start) + std::string(r->names.View(k.name));
  for (const auto& c : r->cpu_spans) s += " " + std::to_string(c.time.start) + std::string(r->names.View(c.name));
  for (const auto& i : r->stats.issues) s += "\n" + i.kind + " " + std::to_string(i.count) + " " + i.message;
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto rec = gputriage::ImportKinetoTraceFromMemory("fuzz.json", bytes, gputriage::KinetoReadOptions{.threads = -1});
  auto in_runs = gputriage::ImportKinetoTraceFromMemory("fuzz.json", bytes,
                                                        gputriage::KinetoReadOptions{.threads = 2, .run_bytes = 64});
  if (Summary(rec) != Summary(in_runs)) {
    std::fprintf(stderr, "one by one:\n%s\nin runs:\n%s\n", Summary(rec).c_str(), Summary(in_runs).c_str());
    std::abort();
  }
  if (!rec.ok()) return 0;
  gputriage::Run run;
  run.recordings.push_back(std::move(*rec));
  (void)gputriage::Diagnose(run);
  return 0;
}
