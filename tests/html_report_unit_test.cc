// The HTML report's data: chart-resolution timelines (a spike survives any
// downsampling), the chart document's coverage arithmetic (kernel time and
// data wait per bucket), and the page's safety (no request, no script escape).
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gputriage/diagnosis.h"
#include "gputriage/metrics.h"
#include "gputriage/report.h"
#include "src/report/chart_data.h"

namespace gputriage {
namespace {

using json = nlohmann::json;

TEST(ChartTimeline, MergedTimelineKeepsEverySpikeAndTheTimeWeightedMean) {
  SeriesSketch s;
  s.SetTimelineBuckets(SeriesSketch::kChartTimelineBuckets);
  // 10^6 samples at 10 Hz, one 100 ms spike to 100 % in a flat 20 %.
  for (int64_t i = 0; i < 1'000'000; ++i) s.Add(i * 100 * kNsPerMs, i == 612'345 ? 100.0 : 20.0);
  const auto full = s.Timeline();
  EXPECT_LE(full.size(), static_cast<size_t>(SeriesSketch::kChartTimelineBuckets));
  EXPECT_GT(full.size(), static_cast<size_t>(SeriesSketch::kChartTimelineBuckets / 2));
  for (size_t points : {size_t{2048}, size_t{700}, size_t{64}, size_t{1}}) {
    const auto tl = s.Timeline(points);
    ASSERT_LE(tl.size(), points);
    double peak = 0, weighted = 0, weight = 0;
    int64_t count = 0;
    for (const auto& p : tl) {
      peak = std::max(peak, p.max);
      weighted += p.mean * p.weight;
      weight += p.weight;
      count += p.count;
      EXPECT_LE(p.min, p.mean);
      EXPECT_GE(p.max, p.mean);
    }
    EXPECT_EQ(peak, 100.0) << points << " points lost the spike";
    EXPECT_EQ(count, 1'000'000);
    EXPECT_NEAR(weighted / weight, s.mean(), 1e-9);
  }
  // Merged buckets start where their group starts: evenly spaced.
  const auto tl = s.Timeline(64);
  for (size_t i = 2; i < tl.size(); ++i)
    EXPECT_EQ(tl[i].start - tl[i - 1].start, tl[1].start - tl[0].start);
}

TEST(ChartTimeline, OnlyTheDrawnActivitySeriesKeepChartResolution) {
  MetricSet set;
  const size_t d = *set.FindOrAdd(0, "GPU-x", "", -1);
  for (int64_t i = 0; i < 100'000; ++i) {
    set.Add(d, Metric::kGpuUtil, i * 100 * kNsPerMs, 50);
    set.Add(d, Metric::kPowerW, i * 100 * kNsPerMs, 300);
  }
  EXPECT_GT(set.devices[d].Get(Metric::kGpuUtil).Timeline().size(), static_cast<size_t>(SeriesSketch::kTimelineBuckets));
  EXPECT_LE(set.devices[d].Get(Metric::kPowerW).Timeline().size(), static_cast<size_t>(SeriesSketch::kTimelineBuckets));
}

Recording TraceWithLoader() {
  Recording rec;
  rec.source_path = "trace.json";
  rec.format = "kineto";
  Device dev;
  dev.id = 0;
  dev.name = "NVIDIA A100-SXM4-80GB";
  rec.devices.push_back(dev);
  // Two steps of 100 ms: 40 ms in the DataLoader, then kernels covering 60 ms.
  for (int s = 0; s < 2; ++s) {
    const TimeNs t = s * 100 * kNsPerMs;
    rec.steps.push_back({s, {t, t + 100 * kNsPerMs}});
    CpuSpan loader;
    loader.time = {t, t + 40 * kNsPerMs};
    loader.kind = CpuSpanKind::kDataLoader;
    loader.name = rec.names.Intern("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__");
    rec.cpu_spans.push_back(loader);
    for (int k = 0; k < 60; ++k) {
      KernelActivity kernel;
      kernel.time = {t + (40 + k) * kNsPerMs, t + (41 + k) * kNsPerMs};
      kernel.device = 0;
      kernel.stream = 7;
      kernel.name = rec.names.Intern("ampere_sgemm_128x64_nn");
      rec.kernels.push_back(kernel);
    }
  }
  return rec;
}

TEST(ChartDocument, TraceBusyAndDataWaitAreTimeWeightedShares) {
  gputriage::Run run;
  run.recordings.push_back(TraceWithLoader());
  const Diagnosis d = Diagnose(run);
  const json doc = json::parse(RenderChartJson(run, d));
  ASSERT_EQ(doc["recordings"].size(), 1u);
  const auto& rec = doc["recordings"][0];
  ASSERT_TRUE(rec["busy"].is_object()) << rec.dump();
  const auto& busy = rec["busy"]["percent"];
  ASSERT_EQ(busy.size(), static_cast<size_t>(kChartPoints));
  double mean = 0;
  for (const auto& v : busy) mean += v.get<double>();
  mean /= static_cast<double>(busy.size());
  EXPECT_NEAR(mean, 60.0, 0.1);  // kernels run 60 of every 100 ms
  const auto& wait = rec["data_wait"]["percent"];
  double wait_mean = 0;
  for (const auto& v : wait) wait_mean += v.get<double>();
  wait_mean /= static_cast<double>(wait.size());
  EXPECT_NEAR(wait_mean, 40.0, 0.1);
  // The first 40 ms: all waiting, no kernel. Buckets are 200 ms / 2048 wide.
  EXPECT_EQ(busy[10].get<double>(), 0.0);
  EXPECT_EQ(wait[10].get<double>(), 100.0);
  EXPECT_EQ(busy[600].get<double>(), 100.0);
  EXPECT_EQ(rec["steps"]["count"], 2);
  EXPECT_EQ(rec["steps"]["start_s"][1].get<double>(), 0.1);
}

TEST(ChartDocument, MarkedStepsGiveBoundariesWaitsAndPhaseBars) {
  gputriage::Run run;
  Recording rec;
  rec.source_path = "record";
  rec.format = "nvml";
  const size_t d = *rec.metrics.FindOrAdd(0, "GPU-a", "", -1);
  for (int i = 0; i < 1000; ++i) {
    const TimeNs t = i * 10 * kNsPerMs;
    rec.metrics.Add(d, Metric::kGpuUtil, t, (i % 10) < 3 ? 0 : 95);
  }
  for (int s = 0; s < 1000; ++s) {  // 10 ms steps: 3 ms data wait, then 7 ms
    MarkedStep st;
    st.number = s;
    st.pid = 42;
    st.span = {s * 10 * kNsPerMs, (s + 1) * 10 * kNsPerMs};
    st.phase_ns[1] = 3 * kNsPerMs;
    st.phase_ns[2] = 7 * kNsPerMs;
    rec.marked_steps.push_back(st);
  }
  run.recordings.push_back(std::move(rec));
  const Diagnosis diag = Diagnose(run);
  const json doc = json::parse(RenderChartJson(run, diag));
  const auto& r = doc["recordings"][0];
  EXPECT_EQ(r["steps"]["count"], 1000);
  EXPECT_TRUE(r["steps"]["drawn"].get<bool>());
  double wait = 0;
  for (const auto& v : r["data_wait"]["percent"]) wait += v.get<double>();
  EXPECT_NEAR(wait / static_cast<double>(r["data_wait"]["percent"].size()), 30.0, 0.5);
  const auto& bars = r["step_phases"];
  EXPECT_EQ(bars["group"], 3);  // 1000 steps in at most 400 bars
  EXPECT_LE(bars["step"].size(), kChartMaxStepBars);
  EXPECT_DOUBLE_EQ(bars["phases"]["data"][0].get<double>(), 3.0);
  EXPECT_DOUBLE_EQ(bars["phases"]["forward"][0].get<double>(), 7.0);
  EXPECT_DOUBLE_EQ(bars["phases"]["unmarked"][0].get<double>(), 0.0);
  ASSERT_EQ(r["gpus"].size(), 1u);
  EXPECT_TRUE(r["gpus"][0]["series"].contains("gpu_util"));
}

TEST(ChartDocument, AClusterScrapeDrawsItsLeastBusyGpus) {
  gputriage::Run run;
  Recording rec;
  rec.source_path = "cluster.prom";
  rec.format = "dcgm-exporter";
  for (int g = 0; g < 40; ++g) {
    const size_t d = *rec.metrics.FindOrAdd(g, "GPU-" + std::to_string(g), "", -1);
    // GPU g runs at (g * 7) % 40 + 50 percent: GPUs 30..39 sit lowest in a shuffled order.
    for (int i = 0; i < 20; ++i) rec.metrics.Add(d, Metric::kGpuUtil, i * kNsPerS, (g * 7) % 40 + 50.0);
  }
  run.recordings.push_back(std::move(rec));
  const json doc = json::parse(RenderChartJson(run, Diagnose(run)));
  const auto& r = doc["recordings"][0];
  EXPECT_EQ(r["gpus_total"], 40);
  ASSERT_EQ(r["gpus"].size(), kChartMaxGpus);
  for (const auto& g : r["gpus"]) EXPECT_LT(g["series"]["gpu_util"]["mean"][0].get<double>(), 66.0) << g["label"];
  EXPECT_TRUE(r.contains("gpus_note"));
}

TEST(HtmlReport, SelfContainedAndNoFileNameEndsItsScripts) {
  gputriage::Run run;
  Recording rec = TraceWithLoader();
  rec.source_path = "/data/</script><script>alert(1)</script><!--x.json";
  run.recordings.push_back(std::move(rec));
  const std::string html = RenderHtml(run, Diagnose(run));
  EXPECT_NE(html.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
  EXPECT_EQ(html.find("<script>alert(1)"), std::string::npos);
  EXPECT_NE(html.find("\\u003c/script>\\u003cscript>alert(1)"), std::string::npos);
  EXPECT_NE(html.find("Leon Sorokin"), std::string::npos);  // uPlot's licence travels with it
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org"));  // no address but SVG's namespace, if any
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);
  // The title shows the source's file name, escaped.
  EXPECT_NE(html.find("<title>gputriage: script&gt;&lt;!--x.json</title>"), std::string::npos);
}

}  // namespace
}  // namespace gputriage
