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
  // Each field the readers fill (the plain-form run reader and simdjson must agree on all).
  for (const auto& k : r->kernels)
    s += " " + std::to_string(k.time.start) + "+" + std::to_string(k.time.duration()) + std::string(r->names.View(k.name)) +
         "/" + std::to_string(k.device) + "/" + std::to_string(k.stream) + "/" + std::to_string(k.correlation) + "/" +
         std::to_string(k.external_id) + "/" + std::to_string(k.grid[0]) + "," + std::to_string(k.block[0]) + "/" +
         std::to_string(k.blocks_per_sm) + "/" + std::to_string(k.est_occupancy_percent) + "/" +
         std::string(r->names.View(k.collective));
  for (const auto& c : r->cpu_spans)
    s += " " + std::to_string(c.time.start) + "+" + std::to_string(c.time.duration()) + std::string(r->names.View(c.name)) +
         "/" + std::to_string(c.thread) + "/" + std::to_string(c.external_id) + "/" +
         std::string(r->names.View(c.first_input_type)) + "/" + std::to_string(c.flops);
  for (const auto& c : r->runtime_calls)
    s += " R" + std::to_string(c.time.start) + "/" + std::to_string(c.correlation) + "/" + std::to_string(c.external_id);
  for (const auto& m : r->memory_ops) s += " M" + std::to_string(m.time.start) + "/" + std::to_string(m.bytes);
  for (const auto& x : r->matrix_shapes)
    s += " X" + std::to_string(x.external_id) + "/" + std::to_string(x.inputs) + "/" + std::to_string(x.dims[0][0]);
  for (const auto& m : r->memory_use) s += " U" + std::to_string(m.peak_allocated) + "/" + std::to_string(m.peak_reserved);
  for (const auto& i : r->stats.issues) s += "\n" + i.kind + " " + std::to_string(i.count) + " " + i.message;
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto rec = gputriage::ImportKinetoTraceFromMemory("fuzz.json", bytes,
                                                    gputriage::KinetoReadOptions{.threads = -1, .runs = false});
  // Runs on two workers, and runs read on the splitter's thread as they are cut.
  for (const int threads : {2, -1}) {
    auto in_runs = gputriage::ImportKinetoTraceFromMemory(
        "fuzz.json", bytes, gputriage::KinetoReadOptions{.threads = threads, .run_bytes = 64});
    if (Summary(rec) != Summary(in_runs)) {
      std::fprintf(stderr, "one by one:\n%s\nin runs (threads %d):\n%s\n", Summary(rec).c_str(), threads,
                   Summary(in_runs).c_str());
      std::abort();
    }
  }
  if (!rec.ok()) return 0;
  gputriage::Run run;
  run.recordings.push_back(std::move(*rec));
  (void)gputriage::Diagnose(run);
  return 0;
}
