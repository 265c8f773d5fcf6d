// Before/after corpus: real runs where a fix was applied for real. For each pair,
// the finding on the "before" run promises an expected gain (a point and a range);
// the "after" run is what the fix delivered. The promise holds when the realized
// value lies in the range and the point is within 15 % of it.
// scripts/gain_table.sh prints the same table from the CLI's JSON.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gputriage/diagnosis.h"
#include "gputriage/import.h"
#include "src/store/run_store.h"

namespace gputriage {
namespace {

const std::string kData = GPUTRIAGE_TEST_DATA_DIR;

struct Pair {
  std::string name;
  std::string before;   // under tests/data (comma-separated for several ranks), or store:PATH#RUN
  std::string after;
  std::string verdict;  // the finding whose gain is checked, or kSilent
  std::string fix;      // what was changed between the runs
};

// A pair whose fix no finding recommended: the silence holds when the fixed run is
// not faster than the run's noise allows. 5 % is compare's noise floor for a step
// time (src/verdicts/compare.cc).
const std::string kSilent = "none";
constexpr double kSilenceNoise = 0.05;

// The realized value in the gain's metric: the mean step time.
double RealizedStepMs(const Diagnosis& d) {
  double total = 0;
  int n = 0;
  for (const auto& a : d.recordings) {
    if (a.avg_step_ns > 0) total += ToMs(a.avg_step_ns), ++n;
    else if (a.marked.steps > 0) total += a.marked.step_ms_mean, ++n;
  }
  return n > 0 ? total / n : NAN;
}

/// A file under tests/data, or "store:PATH#RUN": a run recorded into a committed
/// run store (step markers from a live job), read from a copy so the file stays as
/// committed.
Diagnosis DiagnoseSource(const std::string& source) {
  if (source.rfind("store:", 0) == 0) {
    const size_t hash = source.find('#');
    EXPECT_NE(hash, std::string::npos) << source;
    const std::string path = kData + "/" + source.substr(6, hash - 6);
    const std::string copy = ::testing::TempDir() + "gain_corpus_" + std::to_string(::getpid()) + ".db";
    std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing);
    auto store = RunStore::Open(copy);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (!store.ok()) return {};
    auto rec = (*store)->LoadRun(std::stoll(source.substr(hash + 1)));
    EXPECT_TRUE(rec.ok()) << source << ": " << rec.status().ToString();
    if (!rec.ok()) return {};
    Run run;
    run.recordings.push_back(std::move(*rec));
    store->reset();
    std::filesystem::remove(copy);
    return Diagnose(run);
  }
  // Several files (the ranks of one run): comma-separated.
  std::vector<std::string> paths;
  std::stringstream files(source);
  for (std::string file; std::getline(files, file, ',');) paths.push_back(kData + "/" + file);
  auto run = ImportRun(paths);
  EXPECT_TRUE(run.ok()) << source << ": " << run.status().ToString();
  if (!run.ok()) return {};
  return Diagnose(*run);
}

/// tests/data/gain_pairs.tsv: name, before, after, verdict, fix; '#' comments.
std::vector<Pair> Corpus() {
  std::vector<Pair> pairs;
  std::ifstream in(kData + "/gain_pairs.tsv");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string col; std::getline(ss, col, '\t');) cols.push_back(col);
    if (cols.size() == 5) pairs.push_back({cols[0], cols[1], cols[2], cols[3], cols[4]});
    else ADD_FAILURE() << "gain_pairs.tsv: a row needs 5 tab-separated columns: " << line;
  }
  EXPECT_FALSE(pairs.empty());
  return pairs;
}

class GainCorpus : public ::testing::TestWithParam<Pair> {};

TEST_P(GainCorpus, RealizedLiesInThePredictedRangeAndNearThePoint) {
  const Pair& p = GetParam();
  const Diagnosis before = DiagnoseSource(p.before);
  const Diagnosis after = DiagnoseSource(p.after);
  if (p.verdict == kSilent) {
    for (const auto& x : before.findings)
      EXPECT_FALSE(x.gain.has_value()) << p.name << ": " << x.verdict << " promises a gain from a fix no pair checks";
    const double was = RealizedStepMs(before), now = RealizedStepMs(after);
    ASSERT_FALSE(std::isnan(was) || std::isnan(now)) << p.name;
    EXPECT_GE(now, (1 - kSilenceNoise) * was)
        << p.name << " (" << p.fix << "): " << was << " -> " << now << " ms, a gain no finding predicted";
    return;
  }
  const Finding* f = nullptr;
  for (const auto& x : before.findings)
    if (x.verdict == p.verdict) f = &x;
  ASSERT_NE(f, nullptr) << p.name << ": no " << p.verdict << " finding on the before run";
  ASSERT_TRUE(f->gain.has_value()) << p.name;
  const ExpectedGain& g = *f->gain;
  ASSERT_EQ(g.unit, "ms");
  const double realized = RealizedStepMs(after);
  ASSERT_FALSE(std::isnan(realized));
  EXPECT_LE(g.best, g.expected);
  EXPECT_LE(g.expected, g.worst);
  EXPECT_GE(realized, g.best) << p.name << " (" << p.fix << "): realized " << realized << " ms below the range";
  EXPECT_LE(realized, g.worst) << p.name << ": realized " << realized << " ms above the range";
  EXPECT_LE(std::fabs(g.expected - realized), 0.15 * realized)
      << p.name << ": point " << g.expected << " ms against realized " << realized << " ms";
  EXPECT_FALSE(g.bounded_by.empty());
}

INSTANTIATE_TEST_SUITE_P(RealPairs, GainCorpus, ::testing::ValuesIn(Corpus()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace gputriage
