// The external sort under a memory budget gives exactly std::stable_sort's order,
// whether nothing, some or everything was spilled, and however many runs there are.
#include "src/util/sorted_spill.h"

#include <gtest/gtest.h>

#include <random>

namespace gputriage {
namespace {

struct Record {
  int64_t key = 0;
  int64_t seq = 0;  // insertion order: shows stability
};
struct ByKey {
  bool operator()(const Record& a, const Record& b) const { return a.key < b.key; }
};

std::vector<Record> ReadAll(const SortedSpill<Record, ByKey>& spill) {
  std::vector<Record> out;
  auto cursor = spill.Open();
  Record r;
  while (cursor.Next(&r)) out.push_back(r);
  EXPECT_TRUE(cursor.status().ok()) << cursor.status().ToString();
  return out;
}

void ExpectStableSortOf(size_t n, int64_t key_range, size_t budget_records, size_t max_runs, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Record> input(n);
  for (size_t i = 0; i < n; ++i) input[i] = {static_cast<int64_t>(rng() % static_cast<uint64_t>(key_range)), static_cast<int64_t>(i)};
  SpillOptions options;
  options.budget_bytes = budget_records * sizeof(Record);
  options.read_buffer_bytes = 7 * sizeof(Record);  // odd and small: many refills
  options.max_runs = max_runs;
  SortedSpill<Record, ByKey> spill(options);
  for (const auto& r : input) ASSERT_TRUE(spill.Add(r).ok());
  ASSERT_TRUE(spill.Finish().ok());
  EXPECT_LE(spill.runs(), std::max<size_t>(2, max_runs));
  std::vector<Record> expected = input;
  std::stable_sort(expected.begin(), expected.end(), ByKey());
  const auto got = ReadAll(spill);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].key, expected[i].key) << "at " << i;
    ASSERT_EQ(got[i].seq, expected[i].seq) << "at " << i << ": equal keys out of insertion order";
  }
  // A second reader, at the same time as a third, reads the same.
  auto a = spill.Open();
  auto b = spill.Open();
  Record x, y;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(a.Next(&x));
    ASSERT_TRUE(b.Next(&y));
    ASSERT_EQ(x.seq, got[i].seq);
    ASSERT_EQ(y.seq, got[i].seq);
  }
  EXPECT_FALSE(a.Next(&x));
}

TEST(SortedSpill, InMemoryWhenUnderBudget) { ExpectStableSortOf(1000, 50, 100000, 64, 1); }
TEST(SortedSpill, SomeRunsAndATail) { ExpectStableSortOf(1000, 50, 64, 64, 2); }
TEST(SortedSpill, ExactMultipleOfTheBudgetLeavesNoTail) { ExpectStableSortOf(640, 30, 64, 64, 3); }
TEST(SortedSpill, ManyRunsMergedDownInLevels) { ExpectStableSortOf(20000, 1000, 16, 4, 4); }
TEST(SortedSpill, AllKeysEqual) { ExpectStableSortOf(5000, 1, 33, 3, 5); }
TEST(SortedSpill, Empty) { ExpectStableSortOf(0, 1, 16, 4, 6); }

TEST(SortedSpill, UnwritableDirectoryIsAnErrorNamingIt) {
  SpillOptions options;
  options.budget_bytes = 16 * sizeof(Record);
  options.directory = "/nonexistent-gputriage-dir";
  SortedSpill<Record, ByKey> spill(options);
  Status last;
  for (int i = 0; i < 100 && last.ok(); ++i) last = spill.Add({i, i});
  ASSERT_FALSE(last.ok());
  EXPECT_NE(last.message().find("/nonexistent-gputriage-dir"), std::string::npos) << last.message();
  EXPECT_NE(last.message().find("TMPDIR"), std::string::npos) << last.message();
}

}  // namespace
}  // namespace gputriage
