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

/// How the records go in: one by one, or as ranges of random lengths (up to three
/// budgets long, so one range can fill and spill several runs).
enum class Adding { kOneByOne, kInRanges };

void ExpectStableSortOf(size_t n, int64_t key_range, size_t budget_records, size_t max_runs, uint32_t seed,
                        Adding adding = Adding::kOneByOne, bool presorted = false, int64_t jitter = 0) {
  std::mt19937_64 rng(seed);
  std::vector<Record> input(n);
  // With `jitter`: nearly in order, as a trace's lanes are (runs overlap only at
  // their edges, with ties); else keys at random in [0, key_range).
  for (size_t i = 0; i < n; ++i) {
    const int64_t key = jitter > 0 ? static_cast<int64_t>(i / 3) + static_cast<int64_t>(rng() % static_cast<uint64_t>(jitter))
                                   : static_cast<int64_t>(rng() % static_cast<uint64_t>(key_range));
    input[i] = {key, static_cast<int64_t>(i)};
  }
  if (presorted) {  // in order already, ties in insertion order: the sort is skipped
    std::stable_sort(input.begin(), input.end(), ByKey());
    for (size_t i = 0; i < n; ++i) input[i].seq = static_cast<int64_t>(i);
  }
  SpillOptions options;
  options.budget_bytes = budget_records * sizeof(Record);
  options.read_buffer_bytes = 7 * sizeof(Record);  // odd and small: many refills
  options.max_runs = max_runs;
  SortedSpill<Record, ByKey> spill(options);
  if (adding == Adding::kOneByOne) {
    for (const auto& r : input) ASSERT_TRUE(spill.Add(r).ok());
  } else {
    for (size_t at = 0; at < n;) {
      const size_t count = std::min<size_t>(n - at, rng() % (3 * budget_records + 1));
      ASSERT_TRUE(spill.AddRange(input.data() + at, count).ok());
      at += count;
    }
  }
  EXPECT_EQ(spill.size(), static_cast<int64_t>(n));
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
TEST(SortedSpill, RangesAddLikeRecordsOneByOne) {
  ExpectStableSortOf(1000, 50, 100000, 64, 7, Adding::kInRanges);
  ExpectStableSortOf(1000, 50, 64, 64, 8, Adding::kInRanges);
  ExpectStableSortOf(20000, 1000, 16, 4, 9, Adding::kInRanges);
  ExpectStableSortOf(5000, 1, 33, 3, 10, Adding::kInRanges);
}
TEST(SortedSpill, InputInOrderAlreadyComesOutTheSame) {
  ExpectStableSortOf(1000, 50, 100000, 64, 11, Adding::kOneByOne, true);
  ExpectStableSortOf(3000, 20, 64, 4, 12, Adding::kInRanges, true);
}
/// A reader keeps taking from the run it took from last while that run's head
/// comes first: runs that overlap only at their edges, with equal keys across them.
TEST(SortedSpill, NearlyInOrderRunsOverlappingAtTheirEdges) {
  ExpectStableSortOf(5000, 1, 64, 64, 13, Adding::kOneByOne, false, 40);
  ExpectStableSortOf(20000, 1, 100, 4, 14, Adding::kInRanges, false, 300);
  ExpectStableSortOf(3000, 1, 50, 64, 15, Adding::kOneByOne, false, 2);
}
/// The buffer grows straight to the budget once past a megabyte: a stream is not
/// copied at every doubling (records still arrive one by one or in ranges).
TEST(SortedSpill, LargeBufferReservedOnceNotDoubled) {
  SpillOptions options;
  options.budget_bytes = size_t{8} << 20;
  SortedSpill<Record, ByKey> spill(options);
  const size_t n = (size_t{4} << 20) / sizeof(Record);
  for (size_t i = 0; i < n; ++i) ASSERT_TRUE(spill.Add({static_cast<int64_t>(n - i), static_cast<int64_t>(i)}).ok());
  ASSERT_TRUE(spill.Finish().ok());
  EXPECT_EQ(spill.runs(), 0u);
  const auto all = spill.TakeIfInMemory();
  ASSERT_EQ(all.size(), n);
  EXPECT_EQ(all.capacity(), options.budget_bytes / sizeof(Record));
  EXPECT_EQ(all.front().key, 1);
}

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
