// Reading runs of trace events, one core: the plain-form reader
// (plain_run_parser.cc) against simdjson's run path (the bracket check, then
// EventParser::ParseRun), the baseline, on the same runs of a bundled real trace
// in the same run. Bytes per second are the figure; their ratio is the speed-up.
//
//   build/release/bench/event_reader_benchmark [--benchmark_repetitions=5]
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "src/sources/kineto/kineto_json.h"
#include "src/sources/kineto/plain_run_parser.h"
#include "src/sources/kineto/trace_json_splitter.h"
#include "src/util/byte_source.h"

namespace gputriage {
namespace {

/// The runs the importer would cut from the trace, each with the padding both
/// readers need after it, and simdjson's '[' ... ']' around it.
struct Runs {
  std::vector<std::string> arrays;  // '[' + elements + ']' + padding
  std::vector<size_t> sizes;        // of the elements
  int64_t bytes = 0;
};

class Collector final : public RunHandler {
 public:
  explicit Collector(Runs* runs) : runs_(*runs) {}
  StatusOr<RunProgress> Submit(std::shared_ptr<const EventRun> run) override {
    const std::string_view elements = run->elements();
    std::string array;
    array.reserve(elements.size() + 2 + kSplitterPadding);
    array.append(1, '[').append(elements).append(1, ']').append(kSplitterPadding, '\0');
    runs_.arrays.push_back(std::move(array));
    runs_.sizes.push_back(elements.size());
    runs_.bytes += static_cast<int64_t>(elements.size());
    return RunProgress{run->index + 1, -1, 0};
  }
  StatusOr<RunProgress> Drain() override { return RunProgress{static_cast<int64_t>(runs_.sizes.size()), -1, 0}; }

 private:
  Runs& runs_;
};

const Runs& TraceRuns() {
  static const Runs runs = [] {
    Runs r;
    const std::string path = std::string(GPUTRIAGE_SOURCE_DIR) + "/tests/data/traces/kineto-resnet50-v100/num_workers_0.pt.trace.json.gz";
    auto source = OpenFileSource(path);
    if (!source.ok()) {
      std::fprintf(stderr, "%s\n", source.status().ToString().c_str());
      std::exit(1);
    }
    Collector collector(&r);
    TraceJsonSplitter splitter(**source);
    splitter.HandRunsTo(&collector, size_t{1} << 20);
    auto outcome = splitter.Run([](std::string_view, std::string_view) { return Status::Ok(); },
                                [](std::string_view, int64_t) { return Status::Ok(); });
    if (!outcome.ok() || r.arrays.empty()) {
      std::fprintf(stderr, "%s: no runs\n", path.c_str());
      std::exit(1);
    }
    return r;
  }();
  return runs;
}

void BM_SimdjsonRunPath(benchmark::State& state) {
  const Runs& runs = TraceRuns();
  kineto::EventParser parser;
  int64_t events = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < runs.arrays.size(); ++i) {
      const std::string& array = runs.arrays[i];
      const bool ok = EventRunIsWellFormed(std::string_view(array.data() + 1, runs.sizes[i])) &&
                      parser.ParseRun(std::string_view(array.data(), runs.sizes[i] + 2),
                                      [&](const kineto::RawEvent& e, size_t) { events += e.ph; });
      if (!ok) state.SkipWithError("simdjson did not read a run");
    }
  }
  benchmark::DoNotOptimize(events);
  state.SetBytesProcessed(state.iterations() * runs.bytes);
}
BENCHMARK(BM_SimdjsonRunPath)->Unit(benchmark::kMillisecond);

void BM_PlainRunReader(benchmark::State& state) {
  const Runs& runs = TraceRuns();
  int64_t events = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < runs.arrays.size(); ++i) {
      const bool ok = kineto::ParsePlainRun(std::string_view(runs.arrays[i].data() + 1, runs.sizes[i]),
                                            [&](const kineto::RawEvent& e, size_t) { events += e.ph; });
      if (!ok) state.SkipWithError("the plain reader gave up on a run");
    }
  }
  benchmark::DoNotOptimize(events);
  state.SetBytesProcessed(state.iterations() * runs.bytes);
}
BENCHMARK(BM_PlainRunReader)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace gputriage

BENCHMARK_MAIN();
