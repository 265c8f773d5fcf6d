// Which nvidia-smi field each column of a headerless log holds (see the header
// for what the values tell and what they cannot).
#include "src/sources/metrics/smi_column_inference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "src/sources/metrics/metric_text.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

enum class CellKind { kMissing, kNumber, kTimestamp, kUuid, kPciBusId, kDriver, kHexMask, kPstate, kText };

bool AllOf(std::string_view s, std::string_view allowed) {
  return !s.empty() && s.find_first_not_of(allowed) == std::string_view::npos;
}

constexpr std::string_view kHex = "0123456789abcdefABCDEF";

bool IsPciBusId(std::string_view s) {  // "00000000:07:00.0" (domain 4 or 8 hex digits)
  const size_t c1 = s.find(':');
  if (c1 != 4 && c1 != 8) return false;
  return s.size() == c1 + 8 && AllOf(s.substr(0, c1), kHex) && AllOf(s.substr(c1 + 1, 2), kHex) &&
         s[c1 + 3] == ':' && AllOf(s.substr(c1 + 4, 2), kHex) && s[c1 + 6] == '.' && AllOf(s.substr(c1 + 7), "01234567");
}

bool IsDriverVersion(std::string_view s) {  // "535.104.05": two dots (one is a number)
  return std::count(s.begin(), s.end(), '.') == 2 && AllOf(s, "0123456789.") && s.front() != '.' && s.back() != '.';
}

CellKind Classify(std::string_view cell, metric_text::ValueWithUnit* number) {
  if (metric_text::IsMissing(cell)) return CellKind::kMissing;
  if (StartsWith(cell, "GPU-") || StartsWith(cell, "MIG-")) return CellKind::kUuid;
  if (IsPciBusId(cell)) return CellKind::kPciBusId;
  if (cell.size() > 2 && (StartsWith(cell, "0x") || StartsWith(cell, "0X")) && AllOf(cell.substr(2), kHex))
    return CellKind::kHexMask;
  if (cell.size() >= 2 && cell.size() <= 3 && cell[0] == 'P' && AllOf(cell.substr(1), "0123456789"))
    return CellKind::kPstate;
  if (IsDriverVersion(cell)) return CellKind::kDriver;
  if (auto v = metric_text::ParseNumber(cell)) {
    *number = {*v, {}};
    return CellKind::kNumber;
  }
  if (metric_text::ParseTimestamp(cell)) return CellKind::kTimestamp;
  if (auto v = metric_text::ParseValueWithUnit(cell); v && !v->unit.empty() && v->unit.size() <= 4) {
    *number = *v;
    return CellKind::kNumber;
  }
  return CellKind::kText;
}

/// What one column's cells are, over the rows given.
struct ColumnProfile {
  CellKind kind = CellKind::kMissing;  // the kind most present cells have
  std::string unit;                    // of its numbers ("" none; "?" mixed)
  std::vector<double> values;          // its numbers, in row order (NaN where none)
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  bool constant = true, non_decreasing = true, integers = true, decimals = false;
  bool gpu_name = false;  // text naming an NVIDIA board
  size_t present = 0;
};

void AddNumber(ColumnProfile& p, const metric_text::ValueWithUnit& v, std::string_view cell) {
  if (p.present > 0 && v.value != p.values.back() && !std::isnan(p.values.back())) p.constant = false;
  if (p.present > 0 && !std::isnan(p.values.back()) && v.value < p.values.back()) p.non_decreasing = false;
  p.min = std::min(p.min, v.value);
  p.max = std::max(p.max, v.value);
  if (v.value != std::floor(v.value)) p.integers = false;
  if (cell.find('.') != std::string_view::npos) p.decimals = true;
  const std::string unit(v.unit);
  if (p.present == 0) p.unit = unit;
  else if (p.unit != unit) p.unit = "?";
}

ColumnProfile Profile(const std::vector<std::vector<std::string>>& rows, size_t c) {
  ColumnProfile p;
  int counts[static_cast<int>(CellKind::kText) + 1] = {};
  for (const auto& row : rows) {
    metric_text::ValueWithUnit v;
    const CellKind kind = Classify(row[c], &v);
    ++counts[static_cast<int>(kind)];
    if (kind == CellKind::kNumber) AddNumber(p, v, row[c]);
    p.values.push_back(kind == CellKind::kNumber ? v.value : NAN);
    if (kind == CellKind::kText && !p.gpu_name) {
      const std::string lower = AsciiLower(row[c]);
      for (std::string_view brand : {"nvidia", "tesla", "geforce", "quadro", "rtx", "titan"})
        if (Contains(lower, brand)) p.gpu_name = true;
    }
    if (kind != CellKind::kMissing) ++p.present;
  }
  // The kind of at least 80 % of the present cells; text where none is that common.
  p.kind = p.present == 0 ? CellKind::kMissing : CellKind::kText;
  for (int k = 1; k <= static_cast<int>(CellKind::kText); ++k)
    if (p.present > 0 && counts[k] * 5 >= static_cast<int>(p.present) * 4) p.kind = static_cast<CellKind>(k);
  return p;
}

class Inference {
 public:
  Inference(const std::vector<std::vector<std::string>>& rows, const std::vector<std::string>& known)
      : rows_(rows.size()) {
    const size_t width = rows.empty() ? 0 : rows.front().size();
    out_.fields.assign(width, "");
    for (size_t c = 0; c < width; ++c) {
      profiles_.push_back(Profile(rows, c));
      if (c < known.size() && !known[c].empty()) out_.fields[c] = known[c], header_named_ = true;
    }
  }

  InferredSmiColumns Run() {
    Timestamp();
    Identifiers();
    UnitColumns();
    GpuIndex();
    UnitlessMemory();
    UnitlessPower();
    Ambiguous();
    Verdict();
    return std::move(out_);
  }

 private:
  bool Free(size_t c) const { return out_.fields[c].empty(); }
  bool Number(size_t c) const { return profiles_[c].kind == CellKind::kNumber; }
  bool Named(std::string_view field) const {
    return std::find(out_.fields.begin(), out_.fields.end(), field) != out_.fields.end();
  }
  void Assign(size_t c, std::string field, std::string why) {
    out_.fields[c] = std::move(field);
    if (!why.empty()) out_.assumptions.push_back(fmt::format("column {} is {}: {}", c + 1, out_.fields[c], why));
  }

  void Timestamp() {
    if (Named("timestamp")) return;
    for (size_t c = 0; c < profiles_.size(); ++c) {
      const auto& p = profiles_[c];
      if (!Free(c)) continue;
      if (p.kind == CellKind::kTimestamp) return Assign(c, "timestamp", "");
      // A 10-digit number that never goes back: Unix time in seconds (2001-5138).
      if (Number(c) && p.unit.empty() && p.min >= 1e9 && p.max < 1e11 && p.non_decreasing)
        return Assign(c, "timestamp", "numbers of 10 digits that only grow, read as Unix time in seconds");
    }
  }

  void Identifiers() {
    for (size_t c = 0; c < profiles_.size(); ++c) {
      if (!Free(c)) continue;
      const auto& p = profiles_[c];
      if (p.kind == CellKind::kUuid && !Named("uuid")) Assign(c, "uuid", "");
      else if (p.kind == CellKind::kPciBusId && !Named("pci.bus_id")) Assign(c, "pci.bus_id", "");
      else if (p.kind == CellKind::kDriver && !Named("driver_version")) Assign(c, "driver_version", "");
      else if (p.kind == CellKind::kHexMask && !Named("clocks_event_reasons.active"))
        Assign(c, "clocks_event_reasons.active", "a hexadecimal bitmask, as nvidia-smi prints the clock-event reasons");
      else if (p.kind == CellKind::kText && p.gpu_name && !Named("name")) Assign(c, "name", "");
    }
  }

  /// Columns of one unit, in the order the log has them.
  std::vector<size_t> WithUnit(std::string_view unit) const {
    std::vector<size_t> out;
    for (size_t c = 0; c < profiles_.size(); ++c)
      if (Free(c) && Number(c) && profiles_[c].unit == unit) out.push_back(c);
    return out;
  }

  void UnitColumns() {
    const auto percent = WithUnit("%");
    const char* percent_fields[] = {"utilization.gpu", "utilization.memory"};
    for (size_t i = 0; i < percent.size() && i < 2; ++i)
      if (!Named(percent_fields[i]))
        Assign(percent[i], percent_fields[i],
               fmt::format("the {} column in %, as --query-gpu lists utilization.gpu before utilization.memory",
                           i == 0 ? "first" : "second"));
    const auto watts = WithUnit("W");
    Power(watts, "in W");
    const auto mhz = WithUnit("MHz");
    const char* clock_fields[] = {"clocks.sm", "clocks.mem"};
    for (size_t i = 0; i < mhz.size() && i < 2; ++i)
      if (!Named(clock_fields[i]))
        Assign(mhz[i], clock_fields[i], fmt::format("the {} column in MHz", i == 0 ? "first" : "second"));
    Memory(WithUnit("MiB"), "in MiB");
  }

  /// The first column is power.draw; a later constant one at or above its highest reading, power.limit.
  void Power(const std::vector<size_t>& columns, std::string_view how) {
    if (columns.empty() || Named("power.draw")) return;
    Assign(columns[0], "power.draw", fmt::format("the first column {}", how));
    for (size_t i = 1; i < columns.size(); ++i) {
      const auto& p = profiles_[columns[i]];
      if (p.constant && p.min >= profiles_[columns[0]].max && !Named("power.limit")) {
        Assign(columns[i], "power.limit", fmt::format("{}, constant and never below power.draw", how));
        return;
      }
    }
  }

  /// memory.total is constant and the largest; of the others, one is memory.used,
  /// and with two that sum to the total, the first is used and the second free.
  void Memory(const std::vector<size_t>& columns, std::string_view how) {
    if (columns.empty() || Named("memory.used")) return;
    constexpr size_t kNone = static_cast<size_t>(-1);
    size_t total = kNone;
    for (size_t c : columns)
      if (profiles_[c].constant && (total == kNone || profiles_[c].max > profiles_[total].max)) total = c;
    std::vector<size_t> others;
    for (size_t c : columns)
      if (c != total && (total == kNone || profiles_[c].max <= profiles_[total].max)) others.push_back(c);
    if (total != kNone && others.empty() && columns.size() == 1) total = kNone, others = columns;  // one column: used
    if (total != kNone) Assign(total, "memory.total", fmt::format("{}, constant and the largest", how));
    if (others.empty()) return;
    Assign(others[0], "memory.used",
           others.size() == 1
               ? fmt::format("{}{}", how, total != kNone ? ", never above memory.total" : ", the only such column")
               : fmt::format("the first of the memory columns {} beside memory.total", how));
    if (others.size() >= 2 && total != kNone && SumsTo(others[0], others[1], total))
      Assign(others[1], "memory.free", "it and memory.used add up to memory.total in every row");
  }

  bool SumsTo(size_t a, size_t b, size_t total) const {
    const auto& pa = profiles_[a].values;
    const auto& pb = profiles_[b].values;
    const double t = profiles_[total].max;
    for (size_t r = 0; r < pa.size(); ++r)
      if (!std::isnan(pa[r]) && !std::isnan(pb[r]) && std::abs(pa[r] + pb[r] - t) > 0.05 * t) return false;
    return true;
  }

  /// Integers 0..K-1 (K ≥ 2) that change from row to row: one row per GPU per
  /// interval, GPUs in index order. A constant 0 is left alone (one GPU's index,
  /// or an idle reading: nothing to tell them apart).
  void GpuIndex() {
    if (Named("index") || Named("uuid") || Named("pci.bus_id")) return;
    for (size_t c = 0; c < profiles_.size(); ++c) {
      const auto& p = profiles_[c];
      if (!Free(c) || !Number(c) || !p.unit.empty() || !p.integers || p.min != 0 || p.max < 1 || p.max > 63) continue;
      std::set<double> seen(p.values.begin(), p.values.end());
      size_t changes = 0;
      for (size_t r = 1; r < p.values.size(); ++r) changes += p.values[r] != p.values[r - 1] ? 1 : 0;
      if (seen.size() == static_cast<size_t>(p.max) + 1 && changes * 10 >= (p.values.size() - 1) * 9)
        return Assign(c, "index",
                      fmt::format("integers 0-{} that change from row to row: one row per GPU, in index order",
                                  static_cast<int>(p.max)));
    }
  }

  /// Without units: a constant of 4096 or more (a board's MiB) beside integers
  /// over 100 that never pass it.
  void UnitlessMemory() {
    if (Named("memory.used") || Named("memory.total")) return;
    std::vector<size_t> integers;
    for (size_t c = 0; c < profiles_.size(); ++c)
      if (Free(c) && Number(c) && profiles_[c].unit.empty() && profiles_[c].integers && !profiles_[c].decimals &&
          profiles_[c].min >= 0)
        integers.push_back(c);
    constexpr size_t kNone = static_cast<size_t>(-1);
    size_t total = kNone;
    for (size_t c : integers)
      if (profiles_[c].constant && profiles_[c].max >= 4096 && profiles_[c].max <= 1 << 20) total = c;
    if (total == kNone) return;
    std::vector<size_t> memory{total};
    for (size_t c : integers)
      if (c != total && profiles_[c].max <= profiles_[total].max && profiles_[c].max > 100) memory.push_back(c);
    if (memory.size() < 2) return;
    Memory(memory, "without a unit (read as MiB, nvidia-smi's unit for memory)");
    memory_pair_ = true;
  }

  /// Without units, numbers written with decimals are watts: nvidia-smi prints
  /// power with two, and nothing else it prints has any.
  void UnitlessPower() {
    std::vector<size_t> decimals;
    for (size_t c = 0; c < profiles_.size(); ++c)
      if (Free(c) && Number(c) && profiles_[c].unit.empty() && profiles_[c].decimals && profiles_[c].min >= 0 &&
          profiles_[c].max <= 2000)
        decimals.push_back(c);
    if (!decimals.empty() && Evidence()) Power(decimals, "written with decimals and no unit (read as W)");
  }

  /// Something only a GPU log holds, beside the unitless numbers.
  bool Evidence() const {
    if (memory_pair_ || header_named_) return true;
    for (size_t c = 0; c < profiles_.size(); ++c) {
      const std::string& f = out_.fields[c];
      if (f == "uuid" || f == "pci.bus_id" || f == "name" || f == "driver_version" || f == "clocks_event_reasons.active")
        return true;
      if (Number(c) && (profiles_[c].unit == "%" || profiles_[c].unit == "MiB" || profiles_[c].unit == "W" ||
                        profiles_[c].unit == "MHz"))
        return true;
    }
    return false;
  }

  /// Integers 0-100 left over: utilization, temperature or fan speed.
  void Ambiguous() {
    std::vector<std::string> which;
    for (size_t c = 0; c < profiles_.size(); ++c)
      if (Free(c) && Number(c) && profiles_[c].unit.empty() && profiles_[c].min >= 0 && profiles_[c].max <= 100)
        which.push_back(std::to_string(c + 1));
    if (which.empty()) return;
    const bool utilization = Named("utilization.gpu");
    out_.assumptions.push_back(fmt::format(
        "column{} {} hold{} numbers 0-100 without a unit (temperature, fan speed{}): not read{}",
        which.size() == 1 ? "" : "s", fmt::join(which, ", "), which.size() == 1 ? "s" : "",
        utilization ? "" : " or utilization", utilization ? "" : "; utilization is unknown"));
  }

  void Verdict() {
    out_.nvidia_smi_shape = Named("timestamp") && (Named("index") || Named("uuid") || Named("pci.bus_id"));
    for (const auto& f : out_.fields)
      if (StartsWith(f, "utilization.") || StartsWith(f, "memory.") || StartsWith(f, "power.") || StartsWith(f, "clocks."))
        out_.gpu_data = Evidence();
    if (out_.gpu_data) return;
    size_t numbers = 0, unitless = 0, text = 0;
    for (const auto& p : profiles_) {
      numbers += p.kind == CellKind::kNumber ? 1 : 0;
      unitless += p.kind == CellKind::kNumber && p.unit.empty() ? 1 : 0;
      text += p.kind == CellKind::kText ? 1 : 0;
    }
    out_.what = fmt::format("{} row{} of {} columns: {} numeric ({} without a unit), {} text{}", rows_,
                            rows_ == 1 ? "" : "s", profiles_.size(), numbers, unitless, text,
                            Named("timestamp") ? ", a timestamp" : "");
  }

  size_t rows_;
  std::vector<ColumnProfile> profiles_;
  InferredSmiColumns out_;
  bool memory_pair_ = false;
  bool header_named_ = false;  // a script's header named some fields itself
};

}  // namespace

InferredSmiColumns InferSmiColumns(const std::vector<std::vector<std::string>>& rows,
                                   const std::vector<std::string>& known) {
  return Inference(rows, known).Run();
}

}  // namespace gputriage
