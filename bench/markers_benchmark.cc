// Benchmark: the cost of one step marker (goal <= 30 ns), attached to a ring,
// next to what it cannot avoid (one CLOCK_REALTIME read) and to the disabled
// path (no recorder). Run: build/release/bench/markers_benchmark
#include <time.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include <benchmark/benchmark.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "gputriage/markers.h"
#include "src/markers/marker_ring.h"

namespace {

std::unique_ptr<gputriage::MarkerRing> g_ring;

void AttachRing() {
  if (!g_ring) {
    auto ring = gputriage::MarkerRing::Create(1 << 16);
    if (!ring.ok()) std::abort();
    g_ring = std::move(*ring);
  }
  setenv(gputriage::kMarkersFdEnv, std::to_string(g_ring->fd()).c_str(), 1);
  unsetenv(gputriage::kMarkersPathEnv);  // this ring, not an outer recorder's
  gputriage::ResetMarkersForTesting();
}

void BM_ClockGettimeBaseline(benchmark::State& state) {
  for (auto _ : state) {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    benchmark::DoNotOptimize(ts);
  }
}
BENCHMARK(BM_ClockGettimeBaseline);

#if defined(__x86_64__)
void BM_TscReadBaseline(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(__rdtsc());
}
BENCHMARK(BM_TscReadBaseline);
#endif

void BM_MarkerDisabled(benchmark::State& state) {
  unsetenv(gputriage::kMarkersFdEnv);
  gputriage::ResetMarkersForTesting();
  for (auto _ : state) gputriage_phase_begin(GPUTRIAGE_PHASE_DATA);
}
BENCHMARK(BM_MarkerDisabled);

void BM_Marker(benchmark::State& state) {
  if (state.thread_index() == 0) AttachRing();
  int64_t step = 0;
  for (auto _ : state) gputriage_step_begin(++step);
}
// One writer, and four at once (the ring's index is shared: contention).
BENCHMARK(BM_Marker)->Threads(1)->Threads(4)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
