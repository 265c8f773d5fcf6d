// The fleet's own arithmetic and syntax (the PromQL round trip is tested
// against a real Prometheus in fleet_prometheus_test.sh).
#include <gtest/gtest.h>

#include "src/fleet/fleet.h"
#include "src/fleet/prometheus_api.h"

#include <cmath>

namespace gputriage {
namespace {

// Issue 24: under a PodMonitor (or relabelling) the target's namespace and pod
// (the agent's own, in monitoring) take the plain names and the series' own
// (the job's) become exported_*: the job's win.
TEST(FleetLabels, TheSeriesOwnLabelsWinOverTheTargets) {
  const LabelMap scraped = {{"namespace", "monitoring"},         {"pod", "gputriage-agent-7xk2p"},
                            {"container", "agent"},              {"exported_namespace", "team-a"},
                            {"exported_pod", "trainer-0"},       {"exported_container", "pytorch"},
                            {"hostname", "node-3"},              {"instance", "10.0.0.7:9401"},
                            {"uuid", "GPU-1"},                   {"job", "gputriage-agent"}};
  const LabelMap c = CanonicalFleetLabels(scraped);
  EXPECT_EQ(c.at("namespace"), "team-a");
  EXPECT_EQ(c.at("pod"), "trainer-0");
  EXPECT_EQ(c.at("container"), "pytorch");
  EXPECT_EQ(c.at("hostname"), "node-3");  // never the target's instance while the series names its node
  // Without the collision (honorLabels: true) the plain names are the series' own.
  const LabelMap honored = CanonicalFleetLabels({{"namespace", "team-a"}, {"pod", "trainer-0"}, {"instance", "10.0.0.7:9401"}});
  EXPECT_EQ(honored.at("namespace"), "team-a");
  EXPECT_EQ(honored.at("hostname"), "10.0.0.7:9401");  // the node by its target only when nothing else names it
}

TEST(FleetLabels, AnUnallocatedGpuIsNeverBilledToTheAgentsOwnPod) {
  // Issue 41: a GPU without a job has no pod labels of its own, so under a
  // PodMonitor it carried the agent's pod, and fleet billed its idle time there.
  const LabelMap unallocated = CanonicalFleetLabels({{"namespace", "monitoring"}, {"pod", "gputriage-agent-7xk2p"},
                                                     {"container", "agent"}, {"hostname", "node-3"}, {"uuid", "GPU-1"},
                                                     {"job_source", "none"}});
  EXPECT_EQ(unallocated.count("pod"), 0u);
  EXPECT_EQ(unallocated.count("namespace"), 0u);
  const LabelMap slurm = CanonicalFleetLabels({{"namespace", "monitoring"}, {"pod", "gputriage-agent-7xk2p"},
                                               {"hpc_job", "4411"}, {"job_source", "slurm"}});
  EXPECT_EQ(slurm.count("pod"), 0u);
  EXPECT_EQ(slurm.at("hpc_job"), "4411");
  const LabelMap in_pod = CanonicalFleetLabels({{"namespace", "team-a"}, {"pod", "trainer-0"}, {"job_source", "pod"}});
  EXPECT_EQ(in_pod.at("pod"), "trainer-0");
}

TEST(PromDuration, ParsesPrometheusSyntax) {
  EXPECT_EQ(*ParsePromDuration("24h"), 24 * 3600 * kNsPerS);
  EXPECT_EQ(*ParsePromDuration("7d"), 7 * 86400 * kNsPerS);
  EXPECT_EQ(*ParsePromDuration("1h30m"), 5400 * kNsPerS);
  EXPECT_EQ(*ParsePromDuration("90s"), 90 * kNsPerS);
  EXPECT_EQ(*ParsePromDuration("250ms"), 250'000'000);
  EXPECT_EQ(*ParsePromDuration("2w"), 14 * 86400 * kNsPerS);
  EXPECT_EQ(*ParsePromDuration("1m500ms"), 60 * kNsPerS + 500'000'000);
}

TEST(PromDuration, RefusesWhatPrometheusRefuses) {
  for (const char* bad : {"", "24", "h", "1.5h", "-1h", "24hours", "0s", "1h 30m", "99999999999d"}) {
    auto d = ParsePromDuration(bad);
    EXPECT_FALSE(d.ok()) << bad;
  }
  EXPECT_NE(ParsePromDuration("24x").status().message().find("24x"), std::string::npos);
}

TEST(PromDuration, FormatsTheShortestForm) {
  EXPECT_EQ(FormatPromDuration(24 * 3600 * kNsPerS), "1d");
  EXPECT_EQ(FormatPromDuration(5400 * kNsPerS), "1h30m");
  EXPECT_EQ(FormatPromDuration(61 * kNsPerS), "1m1s");
  EXPECT_EQ(FormatPromDuration(1'500'000'000), "1s500ms");
  for (const char* text : {"7d", "1h30m", "45s", "2d3h4m5s"})
    EXPECT_EQ(*ParsePromDuration(FormatPromDuration(*ParsePromDuration(text))), *ParsePromDuration(text)) << text;
}

TEST(PromQL, EscapesRegexAndStringLiterals) {
  // instance=~"…": a dot in an address matches only a dot.
  EXPECT_EQ(PromRegexEscape("10.0.0.1:9400"), "10\\\\.0\\\\.0\\\\.1:9400");
  EXPECT_EQ(PromRegexEscape("a\"b"), "a\\\"b");
  EXPECT_EQ(PromQuote("a\"b\\c"), "a\\\"b\\\\c");
}

TEST(FleetGrouping, NamesRoundTrip) {
  for (const char* name : {"gpu", "job", "namespace", "node"}) {
    auto g = ParseFleetGrouping(name);
    ASSERT_TRUE(g.has_value()) << name;
    EXPECT_STREQ(FleetGroupingName(*g), name);
  }
  EXPECT_FALSE(ParseFleetGrouping("pod").has_value());
}

}  // namespace
}  // namespace gputriage

namespace gputriage {
namespace {

// Replies are read as streams (one series at a time, never a document tree);
// each shape of reply, well-formed or not, ends in the series or in an error
// that says what was wrong.
struct Read {
  Status status;
  std::vector<std::pair<LabelMap, std::vector<std::pair<TimeNs, double>>>> series;
  std::vector<std::string> warnings;
};

Read ReadReply(const std::string& body, const char* want = "vector", int http_status = 200) {
  Read r;
  r.status = ParsePrometheusReply(body, http_status, "Prometheus http://p/api/v1/query", "up", want,
                                  [&](const LabelMap& labels, const std::vector<std::pair<TimeNs, double>>& points) {
                                    r.series.emplace_back(labels, points);
                                  },
                                  &r.warnings);
  return r;
}

TEST(PrometheusReply, VectorMatrixAndScalarResults) {
  Read v = ReadReply(R"({"status":"success","data":{"resultType":"vector","result":[)"
                     R"({"metric":{"gpu":"0","uuid":"GPU-a"},"value":[1701388800.5,"42.5"]},)"
                     R"({"metric":{},"value":[1701388800.5,"NaN"]}]},"warnings":["partial response","partial response"]})");
  ASSERT_TRUE(v.status.ok()) << v.status.ToString();
  ASSERT_EQ(v.series.size(), 2u);
  EXPECT_EQ(v.series[0].first.at("uuid"), "GPU-a");
  EXPECT_EQ(v.series[0].second.front().first, 1701388800500000000);
  EXPECT_EQ(v.series[0].second.front().second, 42.5);
  EXPECT_TRUE(std::isnan(v.series[1].second.front().second));
  EXPECT_EQ(v.warnings, std::vector<std::string>{"partial response"});

  Read m = ReadReply(R"({"status":"success","data":{"resultType":"matrix","result":[)"
                     R"({"metric":{"gpu":"1"},"values":[[1,"1"],[2,"+Inf"],[3,"3"]]}]}})",
                     "matrix");
  ASSERT_TRUE(m.status.ok()) << m.status.ToString();
  ASSERT_EQ(m.series.size(), 1u);
  EXPECT_EQ(m.series[0].second.size(), 3u);
  EXPECT_TRUE(std::isinf(m.series[0].second[1].second));

  Read s = ReadReply(R"({"status":"success","data":{"resultType":"scalar","result":[1701388800,"7"]}})");
  ASSERT_TRUE(s.status.ok()) << s.status.ToString();
  ASSERT_EQ(s.series.size(), 1u);
  EXPECT_EQ(s.series[0].second.front().second, 7);
}

TEST(PrometheusReply, MalformedRepliesAreNamedErrors) {
  struct Case {
    const char* body;
    int http_status;
    const char* says;
  } cases[] = {
      {"<html>502 Bad Gateway</html>", 502, "not the Prometheus API's JSON"},
      {"Service Unavailable", 503, "not ready"},
      {R"({"status":"error","errorType":"bad_data","error":"parse error at char 3"})", 400, "bad_data: parse error"},
      {R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"b"},"value":[1,"2"]})", 200,
       "not JSON"},  // cut short
      {R"({"status":"success","data":{"resultType":"vector","result":[{"value":[1,"2"]}]}})", 200,
       "a series without its labels"},
      {R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,2]}]}})", 200,
       "a malformed point"},
      {R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":1},"value":[1,"2"]}]}})", 200,
       "a label value that is not a string"},
      {R"({"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"x"]}]}})", 200,
       "a malformed point"},
      {R"({"status":"success","data":{"resultType":"matrix","result":[]}})", 200, "expected a vector result"},
      {R"({"status":"success","data":{"resultType":"vector"}})", 200, "expected a vector result"},
      {R"({"status":"success","data":{"resultType":"vector","result":[[1,"2"]]}})", 200, "neither series nor a point"},
  };
  for (const auto& c : cases) {
    Read r = ReadReply(c.body, "vector", c.http_status);
    EXPECT_FALSE(r.status.ok()) << c.body;
    EXPECT_NE(r.status.message().find(c.says), std::string::npos) << c.body << " → " << r.status.ToString();
    EXPECT_NE(r.status.message().find("http://p/api/v1/query"), std::string::npos) << r.status.ToString();
  }
}

}  // namespace
}  // namespace gputriage
