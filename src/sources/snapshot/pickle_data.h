// A pickle's data, read without running it. PyTorch writes its allocator
// snapshots (torch.cuda.memory._dump_snapshot) as pickles of plain values:
// dicts, lists, tuples, strings, ints, floats, bools, None. This reader knows
// only the opcodes that build such values and the memo that shares them; an
// opcode that names or calls code (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST,
// OBJ, NEWOBJ, PERSID, EXT...) is refused with its name and byte offset, never
// executed. Bounded: values, string sizes, the memo.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gputriage/status.h"

namespace gputriage {

struct PickleValue {
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kBytes, kList, kTuple, kDict };
  Kind kind = Kind::kNone;
  int64_t integer = 0;  // kBool, kInt
  double real = 0;      // kFloat
  std::string text;     // kString (UTF-8), kBytes
  // kList, kTuple (and sets, read as lists): items; kDict: key, value pairs in the
  // pickle's order. A memoized value appears wherever it is referenced (shared,
  // not copied), so a pickle may even hold cycles: walk with a depth limit.
  std::vector<const PickleValue*> items;
  std::vector<std::pair<const PickleValue*, const PickleValue*>> entries;

  bool IsString() const { return kind == Kind::kString; }
  bool IsNumber() const { return kind == Kind::kInt || kind == Kind::kFloat || kind == Kind::kBool; }
  bool IsSequence() const { return kind == Kind::kList || kind == Kind::kTuple; }
  /// A dict's value under a string key, or nullptr.
  const PickleValue* Get(std::string_view key) const;
  /// A number as int64 (a float truncated), else `fallback`.
  int64_t AsInt(int64_t fallback = 0) const;
  /// A string's text, else `fallback`.
  std::string_view AsText(std::string_view fallback = {}) const { return kind == Kind::kString ? text : fallback; }
};

/// Every value a pickle built, owned in one place (values refer to each other
/// by pointer; destroying them is one pass whatever they share).
struct PickleDocument {
  std::deque<PickleValue> values;
  const PickleValue* root = nullptr;
  int64_t trailing_bytes = 0;  // after STOP: not read (a second pickle, or something appended)
};

struct PickleLimits {
  int64_t max_values = 8LL << 20;       // values pushed, memo references and marks included (about 1 GB at most)
  int64_t max_string_bytes = 16 << 20;  // one string or bytes value
  int64_t max_memo = 8LL << 20;         // memo entries
};

/// The value a pickle builds. `what` names the input in errors ("snapshot.pickle").
StatusOr<std::unique_ptr<PickleDocument>> ReadPickle(std::string_view bytes, const std::string& what,
                                                     const PickleLimits& limits = {});

}  // namespace gputriage
