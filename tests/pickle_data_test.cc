// Allocator snapshots are pickles: read as data, never run (issue 42).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "src/sources/snapshot/pickle_data.h"

namespace gputriage {
namespace {

using namespace std::string_literals;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const std::string kSnapshot = std::string(GPUTRIAGE_TEST_DATA_DIR) + "/memory/cs336_snapshot.pickle";

// A real snapshot (torch 2.x, protocol 4): 216 segments, 5,163 history entries
// with Python frames, as CPython's own pickle module reads it.
TEST(PickleData, ARealAllocatorSnapshotReadsAsPlainData) {
  const std::string bytes = ReadFile(kSnapshot);
  ASSERT_GT(bytes.size(), 400'000u);
  auto doc = ReadPickle(bytes, "cs336_snapshot.pickle");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  const PickleValue* root = (*doc)->root;
  ASSERT_EQ(root->kind, PickleValue::Kind::kDict);
  const PickleValue* segments = root->Get("segments");
  ASSERT_TRUE(segments != nullptr && segments->IsSequence());
  EXPECT_EQ(segments->items.size(), 216u);
  const PickleValue* first = segments->items[0];
  EXPECT_EQ(first->Get("total_size")->AsInt(), 25165824);
  EXPECT_EQ(first->Get("blocks")->items[0]->Get("state")->AsText(), "inactive");
  const PickleValue* traces = root->Get("device_traces");
  ASSERT_TRUE(traces != nullptr && traces->IsSequence());
  ASSERT_EQ(traces->items.size(), 1u);
  ASSERT_EQ(traces->items[0]->items.size(), 5163u);
  const PickleValue* alloc = traces->items[0]->items[0];
  EXPECT_EQ(alloc->Get("action")->AsText(), "alloc");
  EXPECT_EQ(alloc->Get("time_us")->AsInt(), 1776479641085368);  // a LONG1 of 7 bytes
  EXPECT_EQ(alloc->Get("frames")->items[0]->Get("line")->AsInt(), 54);
  EXPECT_EQ(root->Get("allocator_settings")->Get("expandable_segments")->kind, PickleValue::Kind::kBool);
  EXPECT_EQ((*doc)->trailing_bytes, 0);
  auto twice = ReadPickle(bytes + bytes, "twice.pickle");  // read up to its STOP; the rest counted, not ignored
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ((*twice)->trailing_bytes, static_cast<int64_t>(bytes.size()));
}

Status Refusal(const std::string& bytes) {
  auto doc = ReadPickle(bytes, "hostile.pickle");
  return doc.ok() ? Status::Ok() : doc.status();
}

// What pickle.loads would run is refused by name, at its byte, and nothing runs.
TEST(PickleData, OpcodesThatNameOrRunCodeAreRefused) {
  // pickle.dumps of os.system("true") bound to a REDUCE: GLOBAL 'posix system'.
  const std::string global = "\x80\x02" "cposix\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."s;
  Status s = Refusal(global);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("opcode GLOBAL"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("hostile.pickle: byte 2"), std::string::npos) << s.message();
  const std::string stack_global = std::string("\x80\x04\x8c\x05posix\x8c\x06system\x93.", 19);
  s = Refusal(stack_global);
  EXPECT_NE(s.message().find("STACK_GLOBAL"), std::string::npos) << s.message();
  s = Refusal(std::string("\x80\x04)R.", 5));
  EXPECT_NE(s.message().find("REDUCE"), std::string::npos) << s.message();
  s = Refusal(std::string("\x80\x04}b.", 5));
  EXPECT_NE(s.message().find("BUILD"), std::string::npos) << s.message();
}

TEST(PickleData, BrokenPicklesAreErrorsNamingTheByte) {
  EXPECT_NE(Refusal(std::string("\x80\x04}", 3)).message().find("ends before its STOP"), std::string::npos);
  EXPECT_NE(Refusal(std::string("\x80\x04\x8c\xff" "ab", 6)).message().find("ends inside a string"), std::string::npos);
  EXPECT_NE(Refusal(std::string("\x80\x04h\x07.", 5)).message().find("memo key 7 was never stored"), std::string::npos);
  EXPECT_NE(Refusal(std::string("\x80\x04" "a.", 4)).message().find("APPEND without a list"), std::string::npos);
  // A LONG4 whose length is over the string limit is refused by its size, not read.
  EXPECT_NE(Refusal(std::string("\x80\x04\x8b\xff\xff\xff\x7f.", 8)).message().find("an integer of 2147483647 bytes"),
            std::string::npos);
  EXPECT_NE(Refusal(std::string("\x80\x04NN.", 5)).message().find("STOP with the stack"), std::string::npos);
}

// A list holding itself (CPython pickles one so) reads without looping or leaking;
// a memo reference bomb stops at the value limit.
TEST(PickleData, CyclesAndReferenceBombsStayBounded) {
  auto doc = ReadPickle(std::string("\x80\x04]\x94(h\x00" "e.", 9), "cycle.pickle");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  EXPECT_EQ((*doc)->root->items[0], (*doc)->root);
  std::string bomb("\x80\x04]\x94(", 5);
  for (int i = 0; i < 2000; ++i) bomb += std::string("h\x00", 2);
  bomb += "e.";
  PickleLimits limits;
  limits.max_values = 1000;
  const Status s = ReadPickle(bomb, "bomb.pickle", limits).status();
  EXPECT_NE(s.message().find("over 1000 values"), std::string::npos) << s.message();
  // MARKs alone: counted too (each held a stack position with no value built).
  const Status marks = ReadPickle("\x80\x04"s + std::string(2000, '(') + ".", "marks.pickle", limits).status();
  EXPECT_NE(marks.message().find("over 1000 values"), std::string::npos) << marks.message();
}

// The values a snapshot's fields take: negative and large integers, floats, text forms.
TEST(PickleData, NumbersAndStringsOfEveryWidth) {
  // {"a": -2, "b": 2**40, "c": 1.5, "d": True, "e": None, "f": b"xy"} at protocol 4, then protocol 0's INT/FLOAT.
  const std::string p4 = std::string(
      "\x80\x04}\x94(\x8c\x01" "a\x94J\xfe\xff\xff\xff\x8c\x01" "b\x94\x8a\x06\x00\x00\x00\x00\x00\x01\x8c\x01" "c\x94G?\xf8\x00\x00\x00\x00\x00\x00"
      "\x8c\x01" "d\x94\x88\x8c\x01" "e\x94N\x8c\x01" "f\x94" "C\x02xyu.", 59);
  auto doc = ReadPickle(p4, "numbers.pickle");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  const PickleValue* r = (*doc)->root;
  EXPECT_EQ(r->Get("a")->AsInt(), -2);
  EXPECT_EQ(r->Get("b")->AsInt(), int64_t{1} << 40);
  EXPECT_DOUBLE_EQ(r->Get("c")->real, 1.5);
  EXPECT_EQ(r->Get("d")->AsInt(), 1);
  EXPECT_EQ(r->Get("e")->kind, PickleValue::Kind::kNone);
  EXPECT_EQ(r->Get("f")->text, "xy");
  auto p0 = ReadPickle("(I-12\nF2.5\nI01\ntp0\n.", "p0.pickle");
  ASSERT_TRUE(p0.ok()) << p0.status().ToString();
  EXPECT_EQ((*p0)->root->items[0]->AsInt(), -12);
  EXPECT_DOUBLE_EQ((*p0)->root->items[1]->real, 2.5);
  EXPECT_EQ((*p0)->root->items[2]->kind, PickleValue::Kind::kBool);
}

// Python writes an int of any size: LONG1 of 9 bytes for 2**64-1 (a real snapshot's
// stack frame held one), protocol 0's digits with 'L'. What fits 64 bits stays an
// int; what does not is the nearest double, never a refusal.
TEST(PickleData, IntegersOfAnySizeAreRead) {
  // pickle.dumps([2**64-1, -(2**64), 2**63-1, -2**63, 2**70, -2**70, 2**63, -2**63-1], protocol=4)
  const std::string p4(
      "\x80\x04\x95[\x00\x00\x00\x00\x00\x00\x00]\x94(\x8a\t\xff\xff\xff\xff\xff\xff\xff\xff\x00\x8a\t\x00\x00\x00"
      "\x00\x00\x00\x00\x00\xff\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80\x8a\t"
      "\x00\x00\x00\x00\x00\x00\x00\x00@\x8a\t\x00\x00\x00\x00\x00\x00\x00\x00\xc0\x8a\t\x00\x00\x00\x00\x00\x00\x00"
      "\x80\x00\x8a\t\xff\xff\xff\xff\xff\xff\xff\x7f\xff" "e.",
      102);
  auto doc = ReadPickle(p4, "longs.pickle");
  ASSERT_TRUE(doc.ok()) << doc.status().ToString();
  const auto& items = (*doc)->root->items;
  ASSERT_EQ(items.size(), 8u);
  EXPECT_EQ(items[0]->kind, PickleValue::Kind::kFloat);
  EXPECT_DOUBLE_EQ(items[0]->real, 18446744073709551615.0);
  EXPECT_DOUBLE_EQ(items[1]->real, -18446744073709551616.0);
  EXPECT_EQ(items[2]->kind, PickleValue::Kind::kInt);
  EXPECT_EQ(items[2]->AsInt(), INT64_MAX);
  EXPECT_EQ(items[3]->AsInt(), INT64_MIN);
  EXPECT_DOUBLE_EQ(items[4]->real, 1180591620717411303424.0);
  EXPECT_DOUBLE_EQ(items[5]->real, -1180591620717411303424.0);
  EXPECT_DOUBLE_EQ(items[6]->real, 9223372036854775808.0);
  EXPECT_DOUBLE_EQ(items[7]->real, -9223372036854775809.0);
  EXPECT_EQ(items[0]->AsInt(-1), -1);  // out of int64: the caller's fallback, never a wrapped value
  // pickle.dumps([10**30, -10**30, 5], protocol=0): LIST and LONG lines.
  auto p0 = ReadPickle("(lp0\nL1000000000000000000000000000000L\naL-1000000000000000000000000000000L\naI5\na.", "p0.pickle");
  ASSERT_TRUE(p0.ok()) << p0.status().ToString();
  EXPECT_DOUBLE_EQ((*p0)->root->items[0]->real, 1e30);
  EXPECT_DOUBLE_EQ((*p0)->root->items[1]->real, -1e30);
  EXPECT_EQ((*p0)->root->items[2]->AsInt(), 5);
  // pickle.dumps({"a\\b\u00e9\u20ac\n": 1, "k": {}}, protocol=0): DICT, UNICODE with its escapes.
  auto d0 = ReadPickle("(dp0\nVa\\u005cb\xe9\\u20ac\\u000a\np1\nI1\nsVk\np2\n(dp3\ns.", "d0.pickle");
  ASSERT_TRUE(d0.ok()) << d0.status().ToString();
  ASSERT_EQ((*d0)->root->entries.size(), 2u);
  EXPECT_EQ((*d0)->root->entries[0].first->text, "a\\b\xc3\xa9\xe2\x82\xac\n");
  EXPECT_EQ((*d0)->root->Get("k")->kind, PickleValue::Kind::kDict);
  // A LONG cut short is still an error that names it.
  EXPECT_NE(Refusal(std::string("\x80\x04\x8a\x09\xff\xff.", 7)).message().find("ends inside a long"), std::string::npos);
}

}  // namespace
}  // namespace gputriage
