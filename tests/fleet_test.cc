// The fleet's own arithmetic and syntax (the PromQL round trip is tested
// against a real Prometheus in fleet_prometheus_test.sh).
#include <gtest/gtest.h>

#include "src/fleet/fleet.h"
#include "src/fleet/prometheus_api.h"

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
