// nvidia-smi --query-gpu=FIELDS --format=csv[,noheader][,nounits] [-l N | -lms N]
//
// Any subset and order of fields. Units come from the header ("power.draw [W]")
// or the values ("631.95 W"). Several GPUs are interleaved, one row per GPU per
// interval; rows are keyed by uuid, pci.bus_id or index, and positionally when
// none of those was logged: by `count`, by --gpus, else by the count the first
// rows show (interleaved_gpus.h: their timing and the continuity of their values;
// those rows wait until it is known).
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "src/sources/metrics/interleaved_gpus.h"
#include "src/sources/metrics/metric_readers.h"
#include "src/sources/metrics/metric_text.h"
#include "src/sources/metrics/smi_column_inference.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

enum class Column {
  kIgnored, kTimestamp, kIndex, kUuid, kPciBusId, kName, kCount, kDriver, kMigMode, kHostname, kDriverModel,
  kMetric,        // a canonical metric
  kPowerFallback, // power.draw.average / .instant: used when power.draw is absent
  kReasonsActive, // clocks_event_reasons.active bitmask
  kReasonBit,     // one clocks_event_reasons.<reason> column, "Active" / "Not Active"
};

struct ColumnSpec {
  Column kind = Column::kIgnored;
  Metric metric = Metric::kCount;
  uint64_t reason_bit = 0;
  std::string unit;  // from the header's "[unit]"
  std::string name;
};

struct FieldEntry {
  std::string_view name;
  Column kind;
  Metric metric;
  uint64_t bit;
};

// nvidia-smi --help-query-gpu names (and their older aliases).
constexpr FieldEntry kFields[] = {
    {"timestamp", Column::kTimestamp, Metric::kCount, 0},
    {"index", Column::kIndex, Metric::kCount, 0},
    {"uuid", Column::kUuid, Metric::kCount, 0},
    {"gpu_uuid", Column::kUuid, Metric::kCount, 0},
    {"pci.bus_id", Column::kPciBusId, Metric::kCount, 0},
    {"gpu_bus_id", Column::kPciBusId, Metric::kCount, 0},
    {"name", Column::kName, Metric::kCount, 0},
    {"gpu_name", Column::kName, Metric::kCount, 0},
    {"count", Column::kCount, Metric::kCount, 0},
    {"driver_version", Column::kDriver, Metric::kCount, 0},
    {"mig.mode.current", Column::kMigMode, Metric::kCount, 0},
    {"hostname", Column::kHostname, Metric::kCount, 0},
    {"driver_model.current", Column::kDriverModel, Metric::kCount, 0},
    {"utilization.gpu", Column::kMetric, Metric::kGpuUtil, 0},
    {"utilization.memory", Column::kMetric, Metric::kMemCopyUtil, 0},
    {"utilization.encoder", Column::kMetric, Metric::kEncoderUtil, 0},
    {"utilization.decoder", Column::kMetric, Metric::kDecoderUtil, 0},
    {"power.draw", Column::kMetric, Metric::kPowerW, 0},
    {"power.draw.average", Column::kPowerFallback, Metric::kPowerW, 0},
    {"power.draw.instant", Column::kPowerFallback, Metric::kPowerW, 0},
    {"power.limit", Column::kMetric, Metric::kPowerLimitW, 0},
    {"enforced.power.limit", Column::kMetric, Metric::kPowerLimitW, 0},
    {"clocks.sm", Column::kMetric, Metric::kSmClockMHz, 0},
    {"clocks.current.sm", Column::kMetric, Metric::kSmClockMHz, 0},
    {"clocks.mem", Column::kMetric, Metric::kMemClockMHz, 0},
    {"clocks.current.memory", Column::kMetric, Metric::kMemClockMHz, 0},
    {"clocks.max.sm", Column::kMetric, Metric::kCount, 0},  // a device fact, handled below
    {"clocks.max.sm_clock", Column::kMetric, Metric::kCount, 0},
    {"temperature.gpu", Column::kMetric, Metric::kGpuTempC, 0},
    {"temperature.memory", Column::kMetric, Metric::kMemTempC, 0},
    {"memory.used", Column::kMetric, Metric::kFbUsedBytes, 0},
    {"memory.free", Column::kMetric, Metric::kFbFreeBytes, 0},
    {"memory.total", Column::kMetric, Metric::kFbTotalBytes, 0},
    {"clocks_event_reasons.active", Column::kReasonsActive, Metric::kClockEventReasons, 0},
    {"clocks_throttle_reasons.active", Column::kReasonsActive, Metric::kClockEventReasons, 0},
    {"clocks_event_reasons.gpu_idle", Column::kReasonBit, Metric::kClockEventReasons, clock_event::kGpuIdle},
    {"clocks_event_reasons.applications_clocks_setting", Column::kReasonBit, Metric::kClockEventReasons,
     clock_event::kApplicationsClocksSetting},
    {"clocks_event_reasons.sw_power_cap", Column::kReasonBit, Metric::kClockEventReasons, clock_event::kSwPowerCap},
    {"clocks_event_reasons.hw_slowdown", Column::kReasonBit, Metric::kClockEventReasons, clock_event::kHwSlowdown},
    {"clocks_event_reasons.hw_thermal_slowdown", Column::kReasonBit, Metric::kClockEventReasons,
     clock_event::kHwThermalSlowdown},
    {"clocks_event_reasons.hw_power_brake_slowdown", Column::kReasonBit, Metric::kClockEventReasons,
     clock_event::kHwPowerBrakeSlowdown},
    {"clocks_event_reasons.sw_thermal_slowdown", Column::kReasonBit, Metric::kClockEventReasons,
     clock_event::kSwThermalSlowdown},
    {"clocks_event_reasons.sync_boost", Column::kReasonBit, Metric::kClockEventReasons, clock_event::kSyncBoost},
    {"clocks_throttle_reasons.gpu_idle", Column::kReasonBit, Metric::kClockEventReasons, clock_event::kGpuIdle},
    {"clocks_throttle_reasons.sw_power_cap", Column::kReasonBit, Metric::kClockEventReasons, clock_event::kSwPowerCap},
    {"clocks_throttle_reasons.hw_slowdown", Column::kReasonBit, Metric::kClockEventReasons, clock_event::kHwSlowdown},
    {"clocks_throttle_reasons.hw_thermal_slowdown", Column::kReasonBit, Metric::kClockEventReasons,
     clock_event::kHwThermalSlowdown},
    {"clocks_throttle_reasons.hw_power_brake_slowdown", Column::kReasonBit, Metric::kClockEventReasons,
     clock_event::kHwPowerBrakeSlowdown},
    {"clocks_throttle_reasons.sw_thermal_slowdown", Column::kReasonBit, Metric::kClockEventReasons,
     clock_event::kSwThermalSlowdown},
};

// Names that logging scripts built on NVML (pynvml) write in nvidia-smi's CSV shape,
// once their units are taken off (NormalisedName): the nvidia-smi field each means.
constexpr std::pair<std::string_view, std::string_view> kScriptNames[] = {
    {"gpu_util", "utilization.gpu"},       {"gpu_utilization", "utilization.gpu"},
    {"utilization_gpu", "utilization.gpu"}, {"gpu_utilisation", "utilization.gpu"},
    {"util", "utilization.gpu"},           {"mem_util", "utilization.memory"},
    {"memory_util", "utilization.memory"}, {"memory_utilization", "utilization.memory"},
    {"mem_used", "memory.used"},           {"memory_used", "memory.used"},
    {"vram_used", "memory.used"},          {"gpu_memory_used", "memory.used"},
    {"mem_total", "memory.total"},         {"memory_total", "memory.total"},
    {"vram_total", "memory.total"},        {"mem_free", "memory.free"},
    {"memory_free", "memory.free"},        {"temp", "temperature.gpu"},
    {"temperature", "temperature.gpu"},    {"gpu_temp", "temperature.gpu"},
    {"gpu_temperature", "temperature.gpu"}, {"power", "power.draw"},
    {"power_draw", "power.draw"},          {"gpu_power", "power.draw"},
    {"sm_clock", "clocks.sm"},             {"clock_sm", "clocks.sm"},
    {"total_memory", "memory.total"},     {"used_memory", "memory.used"},
    {"free_memory", "memory.free"},       {"gpu_name", "name"},
    {"gpu_index", "index"},
    {"gpu_id", "index"},                   {"time", "timestamp"},
    {"datetime", "timestamp"},
};
// A unit written as the name's suffix ("mem_used_mb", "temp_c"). NVML gives bytes,
// and scripts that divide by 2^20 call the result MB: nvidia-smi's own header for
// the same number says MiB.
constexpr std::pair<std::string_view, std::string_view> kUnitSuffixes[] = {
    {"_percent", "%"}, {"_pct", "%"}, {"_mib", "MiB"}, {"_mb", "MiB"}, {"_mhz", "MHz"}, {"_w", "W"}, {"_c", "C"},
};

/// The name without its unit ("power.draw [W]", "memory.used[MiB]", "gpu_util(%)",
/// "gpu_util%", "mem_used_mb"), lower case; the unit, where one was written, in `unit`.
std::string NormalisedName(std::string_view name, std::string& unit) {
  if (name.substr(0, 3) == "\xEF\xBB\xBF") name.remove_prefix(3);  // a UTF-8 byte-order mark
  name = TrimAsciiSpace(name);
  for (auto [open, close] : {std::pair{'[', ']'}, std::pair{'(', ')'}}) {
    const size_t at = name.rfind(open);
    if (at != std::string_view::npos && at > 0 && !name.empty() && name.back() == close) {
      unit = std::string(name.substr(at + 1, name.size() - at - 2));
      name = TrimAsciiSpace(name.substr(0, at));
    }
  }
  // nvidia-smi writes [MiB]; a script that writes "(MB)" divided NVML's bytes by
  // 2^20 as well (an 8 GiB board's total reads 8192 "MB").
  if (unit == "MB") unit = "MiB";
  if (!name.empty() && name.back() == '%') {
    unit = "%";
    name = TrimAsciiSpace(name.substr(0, name.size() - 1));
  }
  std::string lower = AsciiLower(name);
  // "Memory Used (MB)" is a script's memory_used: spaces read as underscores
  // (nvidia-smi's own names have none).
  std::replace(lower.begin(), lower.end(), ' ', '_');
  while (!lower.empty() && lower.back() == '_') lower.pop_back();
  for (auto [suffix, suffix_unit] : kUnitSuffixes)
    if (lower.size() > suffix.size() && lower.ends_with(suffix) && unit.empty()) {
      unit = std::string(suffix_unit);
      lower.resize(lower.size() - suffix.size());
      break;
    }
  return lower;
}

const FieldEntry* FindField(std::string_view name) {
  for (const auto& f : kFields)
    if (name == f.name) return &f;
  return nullptr;
}

/// The nvidia-smi field a header's name means (its own, or a script's name for
/// it such as "gpu_util%"), or nullptr.
const FieldEntry* FieldNamed(const std::string& normalised) {
  const FieldEntry* field = FindField(normalised);
  for (size_t i = 0; field == nullptr && i < std::size(kScriptNames); ++i)
    if (normalised == kScriptNames[i].first) field = FindField(kScriptNames[i].second);
  return field;
}

/// Splits "power.draw [W]" into the field name and the unit; a script's name for
/// a field ("gpu_util%") is read as the nvidia-smi field it means.
ColumnSpec SpecFor(std::string_view header_field) {
  ColumnSpec spec;
  spec.name = NormalisedName(header_field, spec.unit);
  const FieldEntry* field = FieldNamed(spec.name);
  if (field != nullptr) {
    spec.kind = field->kind;
    spec.metric = field->metric;
    spec.reason_bit = field->bit;
  }
  return spec;
}

bool IsKnownField(std::string_view header_field) { return SpecFor(header_field).kind != Column::kIgnored; }

class SmiCsvReader final : public MetricLineReader {
 public:
  explicit SmiCsvReader(MetricReaderContext* ctx) : ctx_(ctx), metrics_(ctx->recording->metrics) {
    ctx_->recording->format = "nvidia-smi-csv";
    if (!ctx_->options.smi_columns.empty()) {
      std::vector<std::string_view> names(ctx_->options.smi_columns.begin(), ctx_->options.smi_columns.end());
      SetColumns(names);
    }
  }

  void Line(std::string_view line, int64_t line_no) override {
    if (TrimAsciiSpace(line).empty()) return;
    if (line.front() == '#') return;  // comments a logging script may add
    metric_text::SplitTrimmed(line, ',', fields_);
    if (LooksLikeHeader()) {
      const std::vector<std::string> header(fields_.begin(), fields_.end());
      if (!headerless_.empty()) InferColumns();  // the rows above the header: a log appended to
      SetColumns(std::vector<std::string_view>(header.begin(), header.end()));
      header_seen_ = true;
      header_names_ = header;
      rows_under_header_ = 0;
      columns_inferred_ = false;
      ReportUnusedColumns(line_no);
      return;
    }
    if (columns_.empty()) {
      // No header (yet): the first rows are kept until their values tell the columns.
      if (!not_gpu_data_.empty()) {
        ++unread_lines_;
        return;
      }
      headerless_.push_back({line_no, std::string(line)});
      headerless_bytes_ += line.size();
      if (headerless_.size() >= inference_rows_ || headerless_bytes_ >= kInferenceBytes) InferColumns();
      return;
    }
    DataRow(line, line_no);
  }

  /// A row under known columns (fields_ holds its fields).
  void DataRow(std::string_view line, int64_t line_no) {
    if (fields_.size() > columns_.size() && rows_under_header_ == 0 && !header_names_.empty() && !columns_inferred_) {
      // Rows wider than the header above them (a script that writes a field of its
      // own before nvidia-smi's row): the rows are read from their values, the
      // header's names taken as hints for the fields they end with.
      wider_than_header_ = header_names_;
      columns_.clear();
      headerless_.push_back({line_no, std::string(line)});
      headerless_bytes_ += line.size();
      return;
    }
    if (fields_.size() != columns_.size()) {
      // nvidia-smi writes its errors into the same stream.
      if (metric_text::IsGpuLost(line)) {
        ctx_->Issue(IssueSeverity::kError, "gpu_lost", [&] {
          return fmt::format("{}: nvidia-smi reports a lost GPU: {}", ctx_->Where(line_no), TrimAsciiSpace(line));
        });
      } else {
        ctx_->Issue(IssueSeverity::kWarning, "bad_row", [&] {
          return fmt::format("{}: {} fields where the {} has {}; row skipped", ctx_->Where(line_no), fields_.size(),
                             columns_inferred_ ? "rows the columns were inferred from have" : "header",
                             columns_.size());
        });
      }
      return;
    }
    if (infer_gpus_ && !layout_) {
      // The GPU count is not known yet: keep the row (bounded) until it is.
      pending_.push_back({line_no, std::vector<std::string>(fields_.begin(), fields_.end())});
      pending_bytes_ += line.size();
      if (pending_.size() >= kInferenceRows || pending_bytes_ >= kInferenceBytes) ResolveLayout();
      return;
    }
    ++rows_under_header_;
    Row(line_no);
  }

  Status Finish() override {
    finishing_ = true;
    if (!headerless_.empty()) InferColumns();
    if (infer_gpus_ && !layout_ && !pending_.empty()) ResolveLayout();
    if (!not_gpu_data_.empty() && metrics_.rows == 0) return InvalidArgumentError(not_gpu_data_);
    if (!not_gpu_data_.empty())
      ctx_->Issue(IssueSeverity::kWarning, "unread_lines", [&] {
        return fmt::format("{} line(s) not read: {}", unread_lines_, not_gpu_data_);
      });
    if (metrics_.rows == 0 && !header_seen_ && columns_.empty())
      return DataLossError(ctx_->file + ": no nvidia-smi CSV rows");
    return Status::Ok();
  }

 private:
  bool LooksLikeHeader() const {
    // A header names known fields; a data row never does (its first field is a
    // timestamp, number or GPU name). Data rows usually start with a digit: the
    // common case costs one comparison.
    if (!columns_.empty() && !fields_[0].empty() && fields_[0][0] >= '0' && fields_[0][0] <= '9') return false;
    int known = 0;
    for (auto f : fields_) known += IsKnownField(f) ? 1 : 0;
    return known > 0 && known * 2 >= static_cast<int>(std::min<size_t>(fields_.size(), 4)) &&
           !metric_text::ParseTimestamp(fields_[0]).has_value() && !metric_text::ParseNumber(fields_[0]).has_value();
  }

  void SetColumns(const std::vector<std::string_view>& names_in) {
    // The names may be fields_, which reading the kept rows below reuses: copy them first.
    const std::vector<std::string> name_copies(names_in.begin(), names_in.end());
    const std::vector<std::string_view> names(name_copies.begin(), name_copies.end());
    if (infer_gpus_ && !layout_ && !pending_.empty()) ResolveLayout();  // rows under the previous header
    columns_.clear();
    has_key_ = false;
    time_col_ = -1;
    bool has_count = false;
    for (auto n : names) {
      columns_.push_back(SpecFor(n));
      const auto& c = columns_.back();
      if (c.kind == Column::kIndex || c.kind == Column::kUuid || c.kind == Column::kPciBusId) has_key_ = true;
      if (c.kind == Column::kTimestamp) time_col_ = static_cast<int>(columns_.size() - 1);
      if (c.kind == Column::kCount) has_count = true;
    }
    // Rows that name no GPU and no count, but carry their times: how many GPUs
    // they cycle through is read from the rows themselves (once per log).
    infer_gpus_ = !has_key_ && !has_count && time_col_ >= 0 && ctx_->options.gpus <= 0;
  }

  void ReportUnusedColumns(int64_t line_no) {
    std::string unused;
    int n = 0;
    for (const auto& c : columns_)
      if (c.kind == Column::kIgnored && ++n <= 8) unused += (unused.empty() ? "" : ", ") + c.name;
    if (n == 0) return;
    ctx_->Issue(IssueSeverity::kInfo, "unused_columns", [&] {
      return fmt::format("{}: {} column(s) not used by the analysis: {}{}", ctx_->Where(line_no), n, unused,
                         n > 8 ? ", ..." : "");
    });
  }

  /// Reads the columns of the rows kept without a header from their values
  /// (smi_column_inference.h), says every assumption in the report, then reads
  /// the rows; or, where the values hold no GPU reading, says what they are.
  void InferColumns() {
    std::vector<HeaderlessRow> rows;
    rows.swap(headerless_);
    headerless_bytes_ = 0;
    std::vector<std::vector<std::string>> split;
    for (const auto& row : rows) {
      metric_text::SplitTrimmed(row.line, ',', fields_);
      split.emplace_back(fields_.begin(), fields_.end());
    }
    // A first row of text alone is a script's own header: the names it gives
    // that gputriage knows are taken; the rest are read from the values.
    const bool names_row = split.size() >= 2 && OnlyText(split.front());
    std::vector<std::string> known;
    if (names_row) {
      for (const auto& name : split.front()) {
        std::string unit;
        const FieldEntry* field = FieldNamed(NormalisedName(name, unit));
        known.emplace_back(field != nullptr ? field->name : std::string_view{});
      }
    }
    const size_t first = names_row ? 1 : 0;
    const size_t width = ModalWidth(split, first);
    std::vector<std::vector<std::string>> sample;
    for (size_t i = first; i < split.size(); ++i)
      if (split[i].size() == width) sample.push_back(split[i]);
    if (!names_row && !wider_than_header_.empty() && wider_than_header_.size() < width) {
      // The header's names go with the rows' last fields; the fields before them
      // are read from their values alone.
      known.assign(width - wider_than_header_.size(), std::string());
      for (const auto& name : wider_than_header_) {
        std::string unit;
        const FieldEntry* field = FieldNamed(NormalisedName(name, unit));
        known.emplace_back(field != nullptr ? field->name : std::string_view{});
      }
    }
    if (known.size() != width) known.clear();
    const InferredSmiColumns inferred = InferSmiColumns(sample, known);
    if (!inferred.gpu_data && inferred.nvidia_smi_shape && !finishing_ && inference_rows_ < kMaxInferenceRows) {
      // nvidia-smi's own rows whose values cannot tell yet: an idle start (a few MiB
      // used, utilization 0) reads like numbers 0-100. Read on (bounded) until they can.
      for (const auto& row : rows) headerless_bytes_ += row.line.size();
      headerless_.swap(rows);
      inference_rows_ *= 2;
      return;
    }
    if (!inferred.gpu_data) {
      not_gpu_data_ = fmt::format(
          "{}: no CSV header, and the values do not read as GPU data ({}); if this is an nvidia-smi --query-gpu "
          "log, name its columns with --smi-columns, e.g. --smi-columns timestamp,index,utilization.gpu,power.draw",
          ctx_->Where(rows.front().line_no), inferred.what);
      unread_lines_ += static_cast<int64_t>(rows.size());
      return;
    }
    SetColumns(std::vector<std::string_view>(inferred.fields.begin(), inferred.fields.end()));
    columns_inferred_ = true;
    ctx_->Issue(IssueSeverity::kInfo, "columns_inferred", [&] {
      const std::string header =
          !wider_than_header_.empty()
              ? fmt::format(" that fits its rows (the header names {} columns, the rows hold {}: its names were "
                            "matched to the rows' last {} fields)",
                            wider_than_header_.size(), width, wider_than_header_.size())
              : names_row ? std::string(" naming nvidia-smi's fields") : std::string();
      return fmt::format("{}: no CSV header{}: the columns were read from the values of {} rows: {}. "
                         "--smi-columns names them where this is wrong",
                         ctx_->Where(rows.front().line_no), header, sample.size(),
                         inferred.assumptions.empty() ? std::string("each field by its header's name")
                                                      : fmt::format("{}", fmt::join(inferred.assumptions, "; ")));
    });
    for (size_t i = first; i < rows.size(); ++i) {
      metric_text::SplitTrimmed(rows[i].line, ',', fields_);
      DataRow(rows[i].line, rows[i].line_no);
    }
  }

  static bool OnlyText(const std::vector<std::string>& cells) {
    for (const auto& cell : cells)
      if (cell.empty() || metric_text::ParseValueWithUnit(cell) || metric_text::ParseTimestamp(cell)) return false;
    return true;
  }

  static size_t ModalWidth(const std::vector<std::vector<std::string>>& rows, size_t first) {
    std::unordered_map<size_t, size_t> counts;
    size_t best = 0, best_count = 0;
    for (size_t i = first; i < rows.size(); ++i)
      if (++counts[rows[i].size()] > best_count) best_count = counts[rows[i].size()], best = rows[i].size();
    return best;
  }

  /// Infers the GPU count from the rows kept so far, says how in the report, then
  /// reads those rows.
  void ResolveLayout() {
    std::vector<TimeNs> times;
    std::vector<RowColumn> cols;
    std::vector<size_t> col_index;
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (columns_[c].kind != Column::kMetric) continue;
      const Metric m = columns_[c].metric;
      cols.push_back({columns_[c].name,
                      m == Metric::kFbUsedBytes || m == Metric::kFbFreeBytes || m == Metric::kGpuTempC ||
                          m == Metric::kMemTempC,
                      {}});
      col_index.push_back(c);
    }
    for (const auto& row : pending_) {
      const auto t = metric_text::ParseTimestamp(row.fields[static_cast<size_t>(time_col_)]);
      if (!t) continue;  // Row() reports it
      times.push_back(*t);
      for (size_t j = 0; j < cols.size(); ++j) {
        const auto v = metric_text::ParseValueWithUnit(row.fields[col_index[j]]);
        cols[j].values.push_back(v ? v->value : NAN);
      }
    }
    layout_ = InferInterleavedGpus(times, cols);
    const int64_t first_line = pending_.front().line_no;
    ctx_->Issue(IssueSeverity::kInfo, "gpu_count_inferred", [&] {
      return fmt::format("{}: no index, uuid or pci.bus_id column: {} GPU{} inferred from the first {} rows ({}); "
                         "--gpus N sets the count",
                         ctx_->Where(first_line), layout_->gpus, layout_->gpus == 1 ? "" : "s", times.size(),
                         layout_->how);
    });
    // The kept rows are read through fields_: they stay alive (replayed_) until the
    // reader goes, so fields_ never points at freed text.
    replayed_.clear();
    replayed_.swap(pending_);
    pending_bytes_ = 0;
    for (const auto& row : replayed_) {
      fields_.assign(row.fields.begin(), row.fields.end());
      Row(row.line_no);
    }
    fields_.clear();
  }

  std::optional<TimeNs> RowTime(std::string_view text) {
    // Rows of one log share the date: parse it once, then only the time of day.
    if (text.size() > 11 && text.substr(0, 11) == cached_date_text_) {
      auto tod = metric_text::ParseTimeOfDay(text.substr(11));
      if (tod) return cached_day_ns_ + *tod;
    }
    auto t = metric_text::ParseTimestamp(text);
    if (t && text.size() > 11 && (text[10] == ' ') && metric_text::ParseTimeOfDay(text.substr(11))) {
      cached_date_text_ = std::string(text.substr(0, 11));
      cached_day_ns_ = *t - *metric_text::ParseTimeOfDay(text.substr(11));
    }
    return t;
  }

  std::optional<size_t> Device(int64_t line_no, TimeNs t, int index, std::string_view uuid, std::string_view pci,
                               int count) {
    if (!has_key_) {
      // Positional: nvidia-smi prints GPUs in index order, one row each per interval.
      if (count > 0) {
        index = static_cast<int>(positional_row_ % count);
      } else if (ctx_->options.gpus > 0) {
        index = static_cast<int>(positional_row_ % ctx_->options.gpus);
      } else if (layout_ && layout_->gpus > 1 && layout_->cycle_gap_ns <= 0) {
        // Evenly spaced rows (continuity told the count): by position.
        const int64_t k = layout_->gpus;
        index = static_cast<int>(((positional_row_ - layout_->phase) % k + k) % k);
      } else if (layout_ && layout_->gpus > 1) {
        // A long gap opens a cycle; within one, each row is the next GPU. Rows
        // before the first whole cycle are the last GPUs of one cut short.
        if (positional_row_ == 0) {
          cycle_pos_ = (layout_->gpus - layout_->phase) % layout_->gpus;
        } else if (t - last_row_time_ > layout_->cycle_gap_ns || t < last_row_time_) {
          cycle_pos_ = 0;
        } else if (++cycle_pos_ >= layout_->gpus) {
          // More rows in a cycle than GPUs: a late query; wrap rather than invent a GPU.
          cycle_pos_ = 0;
          ctx_->Issue(IssueSeverity::kWarning, "gpu_cycle_overrun", [&] {
            return fmt::format("{}: more rows between two long gaps than the {} GPUs inferred; counted from the "
                               "first GPU again (--gpus N sets the count)",
                               ctx_->Where(line_no), layout_->gpus);
          });
        }
        last_row_time_ = t;
        index = cycle_pos_;
      } else {
        index = 0;
      }
      ++positional_row_;
    }
    std::string_view key = !uuid.empty() ? uuid : !pci.empty() ? pci : std::string_view{};
    for (const auto& [k, i, idx] : cache_)
      if (idx == index && k == key) return i;
    auto found = ctx_->Device(index, uuid, pci, -1, line_no);
    if (!found) return std::nullopt;
    if (cache_.size() < 64) cache_.push_back({std::string(key), *found, index});
    return found;
  }

  void Row(int64_t line_no) {
    ++metrics_.rows;
    TimeNs t = 0;
    if (time_col_ >= 0) {
      auto parsed = RowTime(fields_[static_cast<size_t>(time_col_)]);
      if (!parsed) return ctx_->BadTimestamp(line_no, fields_[static_cast<size_t>(time_col_)]);
      t = *parsed;
    } else {
      // No clock logged: rows are one interval apart per GPU cycle.
      t = ctx_->SyntheticTime(synthetic_cycle_, ctx_->options.sample_interval_ns, line_no);
      metrics_.timestamps_synthetic = true;
    }
    int index = -1, count = 0;
    std::string_view uuid, pci;
    for (size_t c = 0; c < columns_.size(); ++c) {
      const auto kind = columns_[c].kind;
      if (kind == Column::kIndex) {
        const auto v = metric_text::ParseNumber(fields_[c]);
        if (v && *v >= 0 && *v < 1e6 && *v == std::floor(*v)) {
          index = static_cast<int>(*v);
        } else if (!metric_text::IsMissing(fields_[c])) {
          // A GPU index that is not one would put the row on a GPU of its own.
          ctx_->Issue(IssueSeverity::kWarning, "bad_row", [&] {
            return fmt::format("{}: GPU index '{}' is not a GPU index; row skipped", ctx_->Where(line_no),
                               fields_[c].substr(0, 40));
          });
          return;
        }
      } else if (kind == Column::kUuid && !metric_text::IsMissing(fields_[c])) {
        uuid = fields_[c];
      } else if (kind == Column::kPciBusId && !metric_text::IsMissing(fields_[c])) {
        pci = fields_[c];
      } else if (kind == Column::kCount) {
        if (auto v = metric_text::ParseNumber(fields_[c]); v && *v > 0 && *v < 4096) count = static_cast<int>(*v);
      }
    }
    if (time_col_ < 0 && has_key_) {
      // Without timestamps a new cycle starts when a GPU repeats.
      if (std::find(cycle_seen_.begin(), cycle_seen_.end(), index) != cycle_seen_.end()) {
        cycle_seen_.clear();
        ++synthetic_cycle_;
        t = ctx_->SyntheticTime(synthetic_cycle_, ctx_->options.sample_interval_ns, line_no);
      }
      cycle_seen_.push_back(index);
    } else if (time_col_ < 0) {
      // Positional GPUs and no clock: `count` rows make one interval.
      t = ctx_->SyntheticTime(count > 0 ? positional_row_ / count : positional_row_, ctx_->options.sample_interval_ns,
                              line_no);
    }
    auto dev = Device(line_no, t, index, uuid, pci, count);
    if (!dev) return;
    MetricDevice& d = metrics_.devices[*dev];
    uint64_t reason_bits = 0;
    bool reason_bits_seen = false, reasons_active_seen = false, power_seen = false;
    double power_fallback = NAN;
    for (size_t c = 0; c < columns_.size(); ++c) {
      const ColumnSpec& col = columns_[c];
      const std::string_view text = fields_[c];
      switch (col.kind) {
        case Column::kName:
          if (d.name.empty() && !metric_text::IsMissing(text)) d.name = std::string(text);
          break;
        case Column::kDriver:
          if (d.driver_version.empty() && !metric_text::IsMissing(text)) d.driver_version = std::string(text);
          break;
        case Column::kHostname:
          if (d.hostname.empty() && !metric_text::IsMissing(text)) d.hostname = std::string(text);
          break;
        case Column::kDriverModel:
          if (!metric_text::IsMissing(text) && !d.labels.count("driver_model")) d.labels["driver_model"] = std::string(text);
          break;
        case Column::kMigMode:
          if (text == "Enabled") d.mig_mode = true;
          break;
        case Column::kMetric:
        case Column::kPowerFallback:
        case Column::kReasonsActive: {
          // Numbers first: nearly every cell is one, and the placeholders ("[N/A]",
          // "[GPU is lost]") only need checking when the parse fails.
          // The reasons bitmask is hex ("0x0000000000000004"): a number-with-unit parse would stop at the 'x'.
          std::optional<metric_text::ValueWithUnit> v;
          if (col.kind == Column::kReasonsActive) {
            if (auto n = metric_text::ParseNumber(text)) v = metric_text::ValueWithUnit{*n, {}};
          } else {
            v = metric_text::ParseValueWithUnit(text);
          }
          if (!v) {
            if (metric_text::IsMissing(text)) {
              if (metric_text::IsGpuLost(text))
                ctx_->Issue(IssueSeverity::kError, "gpu_lost", [&] {
                  return fmt::format("{}: {} reports '{}'", ctx_->Where(line_no), col.name, text);
                });
              break;
            }
            ctx_->Issue(IssueSeverity::kWarning, "bad_value", [&] {
              return fmt::format("{}: column '{}' has unreadable value '{}'; value skipped", ctx_->Where(line_no),
                                 col.name, text);
            });
            break;
          }
          double value = v->value;
          if (col.kind == Column::kReasonsActive) {
            reason_bits = static_cast<uint64_t>(value);
            reasons_active_seen = true;
            break;
          }
          if (col.kind == Column::kPowerFallback) {
            if (std::isnan(power_fallback)) power_fallback = value;
            break;
          }
          if (col.metric == Metric::kCount) {  // clocks.max.sm: a fact
            d.max_sm_clock_mhz = std::max(d.max_sm_clock_mhz, value);
            break;
          }
          if (col.metric == Metric::kFbUsedBytes || col.metric == Metric::kFbFreeBytes ||
              col.metric == Metric::kFbTotalBytes) {
            const std::string_view unit = !v->unit.empty() ? v->unit : std::string_view(col.unit);
            const double scale = metric_text::BytesPerUnit(unit.empty() ? "MiB" : unit);
            value *= scale > 0 ? scale : 1024.0 * 1024.0;
            if (col.metric == Metric::kFbTotalBytes) d.memory_total_bytes = static_cast<int64_t>(value);
          }
          if (col.metric == Metric::kPowerLimitW) d.power_limit_w = value;
          if (col.metric == Metric::kPowerW) power_seen = true;
          metrics_.Add(*dev, col.metric, t, value);
          break;
        }
        case Column::kReasonBit:
          if (text == "Active") reason_bits |= col.reason_bit, reason_bits_seen = true;
          else if (text == "Not Active") reason_bits_seen = true;
          break;
        default:
          break;
      }
    }
    if (!power_seen && !std::isnan(power_fallback)) metrics_.Add(*dev, Metric::kPowerW, t, power_fallback);
    if (reasons_active_seen || reason_bits_seen)
      metrics_.Add(*dev, Metric::kClockEventReasons, t, static_cast<double>(reason_bits));
  }

  MetricReaderContext* ctx_;
  MetricSet& metrics_;
  std::vector<ColumnSpec> columns_;
  std::vector<std::string_view> fields_;
  bool header_seen_ = false;
  bool has_key_ = false;
  int time_col_ = -1;
  std::string cached_date_text_;
  TimeNs cached_day_ns_ = 0;
  struct CacheEntry {
    std::string key;
    size_t device;
    int index;
  };
  std::vector<CacheEntry> cache_;
  int64_t positional_row_ = 0;
  TimeNs last_row_time_ = 0;
  int cycle_pos_ = 0;
  // GPU count inference for rows that name no GPU (see SetColumns).
  static constexpr size_t kInferenceRows = 512;
  static constexpr size_t kMaxInferenceRows = 8192;  // an idle start read on to (nvidia_smi_shape)
  size_t inference_rows_ = kInferenceRows;
  bool finishing_ = false;
  static constexpr size_t kInferenceBytes = 4 << 20;  // rows of absurd width: infer from fewer
  struct PendingRow {
    int64_t line_no;
    std::vector<std::string> fields;
  };
  bool infer_gpus_ = false;
  std::optional<InterleavedGpus> layout_;
  std::vector<PendingRow> pending_;
  std::vector<PendingRow> replayed_;
  size_t pending_bytes_ = 0;
  int64_t synthetic_cycle_ = 0;
  std::vector<int> cycle_seen_;
  // Rows before any header, kept (bounded) until their values tell the columns.
  struct HeaderlessRow {
    int64_t line_no;
    std::string line;
  };
  std::vector<HeaderlessRow> headerless_;
  std::vector<std::string> header_names_;       // the last header's names
  int64_t rows_under_header_ = 0;               // rows read under it
  std::vector<std::string> wider_than_header_;  // a header whose rows hold more fields: hints for inference
  size_t headerless_bytes_ = 0;
  bool columns_inferred_ = false;
  std::string not_gpu_data_;  // why rows without a header were not read, once they were not
  int64_t unread_lines_ = 0;
};

}  // namespace

std::unique_ptr<MetricLineReader> MakeSmiCsvReader(MetricReaderContext* ctx) {
  return std::make_unique<SmiCsvReader>(ctx);
}

bool SmiCsvHeaderLine(std::string_view line) {
  std::vector<std::string_view> fields;
  metric_text::SplitTrimmed(line, ',', fields);
  int known = 0;
  for (auto f : fields) known += IsKnownField(f) ? 1 : 0;
  return known >= 1 && fields.size() >= 1 && IsKnownField(fields[0]);
}

}  // namespace gputriage
