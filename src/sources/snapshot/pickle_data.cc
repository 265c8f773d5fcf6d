#include "src/sources/snapshot/pickle_data.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

namespace gputriage {
namespace {

using Kind = PickleValue::Kind;

/// The opcodes that name or run code, by byte, for the refusal's message.
const char* CodeOpcodeName(unsigned char op) {
  switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x82: case 0x83: case 0x84: return "EXT";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

/// The pickle machine, for data only: a stack of values and marks, and the memo.
class PickleMachine {
 public:
  PickleMachine(std::string_view in, const std::string& what, const PickleLimits& limits)
      : in_(in), what_(what), limits_(limits), doc_(std::make_unique<PickleDocument>()) {}

  StatusOr<std::unique_ptr<PickleDocument>> Run() {
    while (at_ < in_.size()) {
      const size_t op_at = at_;
      const unsigned char op = static_cast<unsigned char>(in_[at_++]);
      if (op == '.') {
        if (stack_.size() != 1 || !marks_.empty()) return Error(op_at, "STOP with the stack not holding one value");
        doc_->root = stack_.back();
        doc_->trailing_bytes = static_cast<int64_t>(in_.size() - at_);
        return std::move(doc_);
      }
      RETURN_IF_ERROR(Step(op, op_at));
    }
    return Error(at_, "the pickle ends before its STOP opcode (cut short?)");
  }

 private:
  Status Error(size_t at, const std::string& why) const {
    return InvalidArgumentError(fmt::format("{}: byte {}: {}", what_, at, why));
  }

  Status Step(unsigned char op, size_t op_at) {
    if (const char* code = CodeOpcodeName(op))
      return Error(op_at, fmt::format("opcode {} would name or run code: this reader takes plain data only "
                                      "(an allocator snapshot holds none), so the file is refused, not run",
                                      code));
    switch (op) {
      case 0x80: return Skip(1, op_at);  // PROTO
      case 0x95: return Skip(8, op_at);  // FRAME: a length hint
      case '(': return Mark(op_at);
      case '}': return Push(New(Kind::kDict), op_at);
      case ']': case 0x8f: return Push(New(Kind::kList), op_at);  // EMPTY_LIST, EMPTY_SET
      case ')': return Push(New(Kind::kTuple), op_at);
      case 't': case 0x91: return Collect(op == 't' ? Kind::kTuple : Kind::kList, op_at);  // TUPLE, FROZENSET
      case 'l': return Collect(Kind::kList, op_at);  // LIST (protocol 0)
      case 'd': return DictFromMark(op_at);          // DICT (protocol 0)
      case 0x85: case 0x86: case 0x87: return TupleOf(op - 0x84, op_at);
      case 's': return SetItem(op_at);
      case 'u': return SetItemsFromMark(op_at);
      case 'a': return Append(op_at);
      case 'e': case 0x90: return AppendFromMark(op_at);  // APPENDS, ADDITEMS
      case 0x94: return Memoize(static_cast<int64_t>(memo_.size()), op_at);
      case 'q': return Put(1, op_at);
      case 'r': return Put(4, op_at);
      case 'p': return Put(0, op_at);
      case 'h': return Get(1, op_at);
      case 'j': return Get(4, op_at);
      case 'g': return Get(0, op_at);
      case 'J': return IntArg(4, true, op_at);
      case 'K': return IntArg(1, false, op_at);
      case 'M': return IntArg(2, false, op_at);
      case 0x8a: return LongArg(1, op_at);
      case 0x8b: return LongArg(4, op_at);
      case 'I': case 'L': return IntLine(op_at);
      case 'G': return BinFloat(op_at);
      case 'F': return FloatLine(op_at);
      case 'N': return Push(New(Kind::kNone), op_at);
      case 0x88: case 0x89: return Bool(op == 0x88, op_at);
      case 0x8c: return Text(1, Kind::kString, op_at);
      case 'X': return Text(4, Kind::kString, op_at);
      case 0x8d: return Text(8, Kind::kString, op_at);
      case 'V': return UnicodeLine(op_at);               // UNICODE (protocol 0 str)
      case 'U': return Text(1, Kind::kString, op_at);  // SHORT_BINSTRING (protocol 0-2 str)
      case 'T': return Text(4, Kind::kString, op_at);  // BINSTRING
      case 'C': return Text(1, Kind::kBytes, op_at);
      case 'B': return Text(4, Kind::kBytes, op_at);
      case 0x8e: case 0x96: return Text(8, Kind::kBytes, op_at);
      case '0': return Pop(op_at);
      case '1': return PopMark(op_at);
      case '2':
        if (stack_.empty()) return Error(op_at, "DUP on an empty stack");
        return Push(stack_.back(), op_at);
      default:
        return Error(op_at, fmt::format("opcode 0x{:02x} is not one this reader knows (plain data only)", op));
    }
  }

  PickleValue* New(Kind kind) {
    PickleValue& v = doc_->values.emplace_back();
    v.kind = kind;
    return &v;
  }
  Status Mark(size_t op_at) {  // counted as a value: a file of MARKs alone stays bounded too
    if (++values_ > limits_.max_values) return Error(op_at, fmt::format("over {} values", limits_.max_values));
    marks_.push_back(stack_.size());
    return Status::Ok();
  }
  Status Push(PickleValue* v, size_t op_at) {
    if (++values_ > limits_.max_values) return Error(op_at, fmt::format("over {} values", limits_.max_values));
    stack_.push_back(v);
    return Status::Ok();
  }
  bool Need(size_t n) const { return in_.size() - at_ >= n; }
  Status Skip(size_t n, size_t op_at) {
    if (!Need(n)) return Error(op_at, "the pickle ends inside an opcode's argument");
    at_ += n;
    return Status::Ok();
  }
  /// An unsigned little-endian argument of n bytes.
  bool ReadLe(size_t n, uint64_t* out) {
    if (!Need(n)) return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in_[at_ + i])) << (8 * i);
    at_ += n;
    *out = v;
    return true;
  }
  /// A text argument up to '\n' (protocol 0).
  bool ReadLine(std::string_view* out) {
    const size_t end = in_.find('\n', at_);
    if (end == std::string_view::npos || end - at_ > 64) return false;
    *out = in_.substr(at_, end - at_);
    at_ = end + 1;
    return true;
  }

  StatusOr<size_t> MarkOrError(size_t op_at) {
    if (marks_.empty()) return Error(op_at, "no MARK before this opcode");
    const size_t mark = marks_.back();
    marks_.pop_back();
    return mark;
  }
  Status Collect(Kind kind, size_t op_at) {
    ASSIGN_OR_RETURN(const size_t mark, MarkOrError(op_at));
    PickleValue* v = New(kind);
    v->items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return Push(v, op_at);
  }
  Status DictFromMark(size_t op_at) {  // the stack above the mark: key, value pairs
    ASSIGN_OR_RETURN(const size_t mark, MarkOrError(op_at));
    if ((stack_.size() - mark) % 2 != 0) return Error(op_at, "DICT without key, value pairs");
    PickleValue* v = New(Kind::kDict);
    for (size_t i = mark; i + 1 < stack_.size(); i += 2) v->entries.emplace_back(stack_[i], stack_[i + 1]);
    stack_.resize(mark);
    return Push(v, op_at);
  }
  Status TupleOf(size_t n, size_t op_at) {
    if (stack_.size() < n + MarkFloor()) return Error(op_at, "TUPLE1/2/3 with too few values on the stack");
    PickleValue* v = New(Kind::kTuple);
    v->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
    stack_.resize(stack_.size() - n);
    return Push(v, op_at);
  }
  size_t MarkFloor() const { return marks_.empty() ? 0 : marks_.back(); }
  Status SetItem(size_t op_at) {  // the stack ends dict, key, value
    if (stack_.size() < 3 + MarkFloor() || stack_[stack_.size() - 3]->kind != Kind::kDict)
      return Error(op_at, "SETITEM without a dict, a key and a value");
    stack_[stack_.size() - 3]->entries.emplace_back(stack_[stack_.size() - 2], stack_.back());
    stack_.resize(stack_.size() - 2);
    return Status::Ok();
  }
  Status SetItemsFromMark(size_t op_at) {
    ASSIGN_OR_RETURN(const size_t mark, MarkOrError(op_at));
    if (mark == 0 || stack_[mark - 1]->kind != Kind::kDict || (stack_.size() - mark) % 2 != 0)
      return Error(op_at, "SETITEMS without a dict and key, value pairs");
    PickleValue* dict = stack_[mark - 1];
    for (size_t i = mark; i + 1 < stack_.size(); i += 2) dict->entries.emplace_back(stack_[i], stack_[i + 1]);
    stack_.resize(mark);
    return Status::Ok();
  }
  Status Append(size_t op_at) {  // the stack ends list, value
    if (stack_.size() < 2 + MarkFloor() || stack_[stack_.size() - 2]->kind != Kind::kList)
      return Error(op_at, "APPEND without a list");
    stack_[stack_.size() - 2]->items.push_back(stack_.back());
    stack_.pop_back();
    return Status::Ok();
  }
  Status AppendFromMark(size_t op_at) {
    ASSIGN_OR_RETURN(const size_t mark, MarkOrError(op_at));
    if (mark == 0 || stack_[mark - 1]->kind != Kind::kList) return Error(op_at, "APPENDS without a list");
    PickleValue* list = stack_[mark - 1];
    list->items.insert(list->items.end(), stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return Status::Ok();
  }
  Status Memoize(int64_t key, size_t op_at) {
    if (stack_.empty()) return Error(op_at, "MEMOIZE on an empty stack");
    if (static_cast<int64_t>(memo_.size()) >= limits_.max_memo) return Error(op_at, "the memo is over its limit");
    memo_[key] = stack_.back();
    return Status::Ok();
  }
  /// A memo key: an n-byte argument, or (n 0) protocol 0's text line.
  StatusOr<int64_t> MemoKey(size_t n, const char* opcode, size_t op_at) {
    uint64_t binary = 0;
    std::string_view line;
    int64_t key = 0;
    if (n > 0 ? !ReadLe(n, &binary) : !ReadLine(&line) || !ParseInt(line, &key))
      return Error(op_at, fmt::format("{} without a memo key", opcode));
    return n > 0 ? static_cast<int64_t>(binary) : key;
  }
  Status Put(size_t n, size_t op_at) {
    ASSIGN_OR_RETURN(const int64_t key, MemoKey(n, "PUT", op_at));
    return Memoize(key, op_at);
  }
  Status Get(size_t n, size_t op_at) {
    ASSIGN_OR_RETURN(const int64_t key, MemoKey(n, "GET", op_at));
    auto it = memo_.find(key);
    if (it == memo_.end()) return Error(op_at, fmt::format("memo key {} was never stored", key));
    return Push(it->second, op_at);
  }
  Status PushInt(int64_t v, size_t op_at) {
    PickleValue* p = New(Kind::kInt);
    p->integer = v;
    return Push(p, op_at);
  }
  Status IntArg(size_t n, bool is_signed, size_t op_at) {
    uint64_t raw = 0;
    if (!ReadLe(n, &raw)) return Error(op_at, "the pickle ends inside an integer");
    const int64_t v = is_signed ? static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(raw))) : static_cast<int64_t>(raw);
    return PushInt(v, op_at);
  }
  /// LONG1/LONG4: a little-endian two's complement integer of any length. One that
  /// fits 64 bits is an int; a longer one (Python writes 2^64-1, a stack frame's
  /// "no line" in some snapshots, as 9 bytes) is kept as the nearest double: no
  /// field a snapshot is read for needs more, and the file stays readable.
  Status LongArg(size_t length_bytes, size_t op_at) {
    uint64_t n = 0;
    if (!ReadLe(length_bytes, &n)) return Error(op_at, "the pickle ends inside a long's length");
    if (n > static_cast<uint64_t>(limits_.max_string_bytes))
      return Error(op_at, fmt::format("an integer of {} bytes (over the limit of {})", n, limits_.max_string_bytes));
    if (!Need(static_cast<size_t>(n))) return Error(op_at, "the pickle ends inside a long");
    const std::string_view bytes = in_.substr(at_, static_cast<size_t>(n));
    at_ += static_cast<size_t>(n);
    if (bytes.empty()) return PushInt(0, op_at);
    const auto byte = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
    const bool negative = (byte(bytes.size() - 1) & 0x80) != 0;
    // Bytes above the eighth that only repeat the sign leave the value in 64 bits.
    const unsigned char extension = negative ? 0xff : 0x00;
    size_t significant = bytes.size();
    while (significant > 8 && byte(significant - 1) == extension) --significant;
    const bool fits = significant < 8 || (significant == 8 && ((byte(7) & 0x80) != 0) == negative);
    if (fits) {
      uint64_t raw = 0;
      for (size_t i = 0; i < std::min<size_t>(bytes.size(), 8); ++i) raw |= static_cast<uint64_t>(byte(i)) << (8 * i);
      const size_t width = std::min<size_t>(bytes.size(), 8);
      if (width < 8 && negative) raw |= ~uint64_t{0} << (8 * width);  // sign-extend
      return PushInt(static_cast<int64_t>(raw), op_at);
    }
    // Over 64 bits: the magnitude, from the most significant byte down (for a
    // negative value, -(~x + 1) taken byte by byte).
    double magnitude = 0;
    for (size_t i = bytes.size(); i-- > 0;) magnitude = magnitude * 256.0 + (negative ? 255 - byte(i) : byte(i));
    return PushFloat(negative ? -(magnitude + 1) : magnitude, op_at);
  }
  static bool ParseInt(std::string_view s, int64_t* out) {
    if (!s.empty() && s.back() == 'L') s.remove_suffix(1);
    if (s.empty() || s.size() > 19) return false;  // with the sign: 18 digits at most, no overflow
    bool negative = s.front() == '-';
    if (negative || s.front() == '+') s.remove_prefix(1);
    if (s.empty() || s.size() > 18) return false;
    int64_t v = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      v = v * 10 + (c - '0');
    }
    *out = negative ? -v : v;
    return true;
  }
  Status IntLine(size_t op_at) {
    std::string_view line;
    int64_t v = 0;
    if (!ReadLine(&line)) return Error(op_at, "INT without its digits");
    if (line == "01" || line == "00") return Bool(line == "01", op_at);  // protocol 0's True and False
    if (ParseInt(line, &v)) return PushInt(v, op_at);
    // Digits over 64 bits (protocol 0's LONG): the nearest double, as LongArg.
    std::string_view digits = line;
    if (!digits.empty() && digits.back() == 'L') digits.remove_suffix(1);
    const bool negative = !digits.empty() && digits.front() == '-';
    if (negative || (!digits.empty() && digits.front() == '+')) digits.remove_prefix(1);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos)
      return Error(op_at, "INT or LONG with text that is not an integer");
    double magnitude = 0;
    for (char c : digits) magnitude = magnitude * 10 + (c - '0');
    return PushFloat(negative ? -magnitude : magnitude, op_at);
  }
  Status PushFloat(double v, size_t op_at) {
    PickleValue* p = New(Kind::kFloat);
    p->real = v;
    return Push(p, op_at);
  }
  Status BinFloat(size_t op_at) {  // 8 bytes, big-endian
    if (!Need(8)) return Error(op_at, "the pickle ends inside a float");
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits = (bits << 8) | static_cast<unsigned char>(in_[at_ + static_cast<size_t>(i)]);
    at_ += 8;
    double v = 0;
    std::memcpy(&v, &bits, sizeof v);
    return PushFloat(v, op_at);
  }
  Status FloatLine(size_t op_at) {
    std::string_view line;
    if (!ReadLine(&line)) return Error(op_at, "FLOAT without its digits");
    const std::string text(line);
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0') return Error(op_at, "FLOAT with text that is not a number");
    return PushFloat(v, op_at);
  }
  Status Bool(bool v, size_t op_at) {
    PickleValue* p = New(Kind::kBool);
    p->integer = v ? 1 : 0;
    return Push(p, op_at);
  }
  Status Text(size_t length_bytes, Kind kind, size_t op_at) {
    uint64_t n = 0;
    if (!ReadLe(length_bytes, &n)) return Error(op_at, "the pickle ends inside a string's length");
    if (n > static_cast<uint64_t>(limits_.max_string_bytes))
      return Error(op_at, fmt::format("a string of {} bytes (over the {}-byte limit)", n, limits_.max_string_bytes));
    if (!Need(static_cast<size_t>(n))) return Error(op_at, "the pickle ends inside a string");
    PickleValue* p = New(kind);
    p->text.assign(in_.substr(at_, static_cast<size_t>(n)));
    at_ += static_cast<size_t>(n);
    return Push(p, op_at);
  }
  /// UNICODE (protocol 0): a line in raw-unicode-escape: bytes are Latin-1 code
  /// points, \uXXXX and \UXXXXXXXX escapes the rest (Python escapes '\\' and
  /// newlines so). Stored as UTF-8, as the binary opcodes' strings are.
  Status UnicodeLine(size_t op_at) {
    const size_t end = in_.find('\n', at_);
    if (end == std::string_view::npos) return Error(op_at, "UNICODE without its line's end");
    if (end - at_ > static_cast<size_t>(limits_.max_string_bytes))
      return Error(op_at, fmt::format("a string over the {}-byte limit", limits_.max_string_bytes));
    const std::string_view raw = in_.substr(at_, end - at_);
    at_ = end + 1;
    PickleValue* p = New(Kind::kString);
    for (size_t i = 0; i < raw.size(); ++i) {
      uint32_t code = static_cast<unsigned char>(raw[i]);
      const size_t digits = raw[i] == '\\' && i + 1 < raw.size() ? (raw[i + 1] == 'u' ? 4 : raw[i + 1] == 'U' ? 8 : 0) : 0;
      if (digits > 0) {
        if (i + 2 + digits > raw.size()) return Error(op_at, "UNICODE with a cut \\u escape");
        code = 0;
        for (size_t k = i + 2; k < i + 2 + digits; ++k) {
          const char c = raw[k];
          const int hex = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
          if (hex < 0) return Error(op_at, "UNICODE with a \\u escape that is not hexadecimal");
          code = code * 16 + static_cast<uint32_t>(hex);
        }
        if (code > 0x10FFFF) return Error(op_at, "UNICODE with an escape beyond Unicode");
        i += 1 + digits;
      }
      AppendUtf8(code, p->text);
    }
    return Push(p, op_at);
  }
  static void AppendUtf8(uint32_t code, std::string& out) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }
  Status Pop(size_t op_at) {
    if (stack_.size() <= MarkFloor()) {
      if (!marks_.empty() && stack_.size() == marks_.back()) {  // POP of a mark
        marks_.pop_back();
        return Status::Ok();
      }
      return Error(op_at, "POP on an empty stack");
    }
    stack_.pop_back();
    return Status::Ok();
  }
  Status PopMark(size_t op_at) {
    ASSIGN_OR_RETURN(const size_t mark, MarkOrError(op_at));
    stack_.resize(mark);
    return Status::Ok();
  }

  std::string_view in_;
  size_t at_ = 0;
  const std::string& what_;
  PickleLimits limits_;
  std::unique_ptr<PickleDocument> doc_;
  std::vector<PickleValue*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<int64_t, PickleValue*> memo_;
  int64_t values_ = 0;
};

}  // namespace

const PickleValue* PickleValue::Get(std::string_view key) const {
  if (kind != Kind::kDict) return nullptr;
  // A snapshot's dicts hold a dozen keys: past 64 a (hostile) dict is not searched,
  // so a lookup never costs more than that however large the dict.
  const size_t n = std::min<size_t>(entries.size(), 64);
  for (size_t i = 0; i < n; ++i)
    if (entries[i].first->kind == Kind::kString && entries[i].first->text == key) return entries[i].second;
  return nullptr;
}

int64_t PickleValue::AsInt(int64_t fallback) const {
  if (kind == Kind::kInt || kind == Kind::kBool) return integer;
  if (kind == Kind::kFloat && real > -9.2e18 && real < 9.2e18) return static_cast<int64_t>(real);
  return fallback;
}

StatusOr<std::unique_ptr<PickleDocument>> ReadPickle(std::string_view bytes, const std::string& what,
                                                     const PickleLimits& limits) {
  return PickleMachine(bytes, what, limits).Run();
}

}  // namespace gputriage
