// Column-table monitors: `nvidia-smi dmon` and `dcgmi dmon`.
//
// nvidia-smi dmon prints a '#'-prefixed header of column names, then a '#' line
// of units, then one whitespace-separated row per GPU per interval ("-" when a
// value is unavailable). -s selects column groups, -o DT/T adds date/time
// columns, --gpm-metrics adds GPM columns, --format csv separates by commas.
//
// dcgmi dmon prints "#Entity  GPUTL  SMACT ..." and an "ID" line, then rows like
// "GPU 0   45   0.912" (N/A when unavailable). DCGM profiling fields are 0-1
// ratios; they become percent here.
//
// Neither writes timestamps unless asked (-o DT): rows are then spaced by the
// sampling interval (dmon -d / dcgmi -d), one interval per cycle over the GPUs.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>

#include "src/sources/metrics/metric_readers.h"
#include "src/sources/metrics/metric_text.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

enum class Role { kIgnored, kDate, kTime, kGpuIndex, kMetric, kMaxSmClock };

struct DmonColumn {
  Role role = Role::kIgnored;
  Metric metric = Metric::kCount;
  double scale = 1.0;  // source unit → canonical unit
  std::string name;
};

struct NameEntry {
  std::string_view name;  // lower case
  Role role;
  Metric metric;
  double scale;
};

constexpr double kMiB = 1024.0 * 1024.0;

// nvidia-smi dmon column names (-s p,u,c,v,m,e,t and --gpm-metrics).
constexpr NameEntry kSmiDmonColumns[] = {
    {"date", Role::kDate, Metric::kCount, 1},
    {"time", Role::kTime, Metric::kCount, 1},
    {"gpu", Role::kGpuIndex, Metric::kCount, 1},
    {"idx", Role::kGpuIndex, Metric::kCount, 1},
    {"pwr", Role::kMetric, Metric::kPowerW, 1},
    {"gtemp", Role::kMetric, Metric::kGpuTempC, 1},
    {"mtemp", Role::kMetric, Metric::kMemTempC, 1},
    {"sm", Role::kMetric, Metric::kGpuUtil, 1},  // dmon's "sm" is NVML utilization.gpu
    {"mem", Role::kMetric, Metric::kMemCopyUtil, 1},
    {"enc", Role::kMetric, Metric::kEncoderUtil, 1},
    {"dec", Role::kMetric, Metric::kDecoderUtil, 1},
    {"mclk", Role::kMetric, Metric::kMemClockMHz, 1},
    {"pclk", Role::kMetric, Metric::kSmClockMHz, 1},  // processor (graphics) clock, equal to SM clock
    {"fb", Role::kMetric, Metric::kFbUsedBytes, kMiB},
    {"rxpci", Role::kMetric, Metric::kPcieRxBytesPerS, 1e6},  // MB/s
    {"txpci", Role::kMetric, Metric::kPcieTxBytesPerS, 1e6},
    // GPM (Hopper+): percentages 0-100; PCIe/NVLink in MiB/s per the NVML header.
    {"gract", Role::kMetric, Metric::kGrEngineActive, 1},
    {"grutil", Role::kMetric, Metric::kGrEngineActive, 1},
    {"smutil", Role::kMetric, Metric::kSmActive, 1},
    {"smact", Role::kMetric, Metric::kSmActive, 1},
    {"smocc", Role::kMetric, Metric::kSmOccupancy, 1},
    {"mmaact", Role::kMetric, Metric::kTensorActive, 1},
    {"anytensor", Role::kMetric, Metric::kTensorActive, 1},
    {"tensor", Role::kMetric, Metric::kTensorActive, 1},
    {"dram", Role::kMetric, Metric::kDramActive, 1},
    {"drama", Role::kMetric, Metric::kDramActive, 1},
    {"fp64", Role::kMetric, Metric::kFp64Active, 1},
    {"fp32", Role::kMetric, Metric::kFp32Active, 1},
    {"fp16", Role::kMetric, Metric::kFp16Active, 1},
    {"pcirx", Role::kMetric, Metric::kPcieRxBytesPerS, kMiB},
    {"pcitx", Role::kMetric, Metric::kPcieTxBytesPerS, kMiB},
    {"nvlrx", Role::kMetric, Metric::kNvlinkRxBytesPerS, kMiB},
    {"nvltx", Role::kMetric, Metric::kNvlinkTxBytesPerS, kMiB},
};

// dcgmi dmon field tags (dcgm_fields.h short names). Ratios become percent.
constexpr NameEntry kDcgmiColumns[] = {
    {"gputl", Role::kMetric, Metric::kGpuUtil, 1},
    {"mcutl", Role::kMetric, Metric::kMemCopyUtil, 1},
    {"ecutl", Role::kMetric, Metric::kEncoderUtil, 1},
    {"dcutl", Role::kMetric, Metric::kDecoderUtil, 1},
    {"gract", Role::kMetric, Metric::kGrEngineActive, 100},
    {"smact", Role::kMetric, Metric::kSmActive, 100},
    {"smocc", Role::kMetric, Metric::kSmOccupancy, 100},
    {"tenso", Role::kMetric, Metric::kTensorActive, 100},
    {"drama", Role::kMetric, Metric::kDramActive, 100},
    {"fp64a", Role::kMetric, Metric::kFp64Active, 100},
    {"fp32a", Role::kMetric, Metric::kFp32Active, 100},
    {"fp16a", Role::kMetric, Metric::kFp16Active, 100},
    {"pcitx", Role::kMetric, Metric::kPcieTxBytesPerS, 1},
    {"pcirx", Role::kMetric, Metric::kPcieRxBytesPerS, 1},
    {"nvltx", Role::kMetric, Metric::kNvlinkTxBytesPerS, 1},
    {"nvlrx", Role::kMetric, Metric::kNvlinkRxBytesPerS, 1},
    {"power", Role::kMetric, Metric::kPowerW, 1},
    {"powr", Role::kMetric, Metric::kPowerW, 1},
    {"pwlmt", Role::kMetric, Metric::kPowerLimitW, 1},
    {"tmptr", Role::kMetric, Metric::kGpuTempC, 1},
    {"gput", Role::kMetric, Metric::kGpuTempC, 1},
    {"mmtmp", Role::kMetric, Metric::kMemTempC, 1},
    {"smclk", Role::kMetric, Metric::kSmClockMHz, 1},
    {"mmclk", Role::kMetric, Metric::kMemClockMHz, 1},
    {"maxsmclk", Role::kMaxSmClock, Metric::kCount, 1},
    {"fbusd", Role::kMetric, Metric::kFbUsedBytes, kMiB},
    {"fbfre", Role::kMetric, Metric::kFbFreeBytes, kMiB},
    {"fbttl", Role::kMetric, Metric::kFbTotalBytes, kMiB},
    {"totec", Role::kMetric, Metric::kEnergyJ, 1e-3},  // mJ
    {"dvccr", Role::kMetric, Metric::kClockEventReasons, 1},
};

template <size_t N>
DmonColumn Lookup(const NameEntry (&table)[N], std::string_view name) {
  DmonColumn spec;
  spec.name = AsciiLower(name);
  for (const auto& e : table)
    if (spec.name == e.name) {
      spec.role = e.role;
      spec.metric = e.metric;
      spec.scale = e.scale;
      break;
    }
  return spec;
}

/// A dcgmi dmon tag (GRACT, FBUSD, ...) from the field table.
bool IsDcgmiTag(std::string_view name) {
  for (const auto& e : kDcgmiColumns)
    if (EqualsLowered(name, e.name)) return true;
  return false;
}

bool IsEntityColumn(std::string_view name) {
  for (std::string_view n : {"entity", "entityid", "entity_id", "gpu", "gpuid", "gpu_id", "id"})
    if (EqualsLowered(name, n)) return true;
  return false;
}

bool IsTimeColumn(std::string_view name) {
  for (std::string_view n : {"timestamp", "time", "ts", "datetime"})
    if (EqualsLowered(name, n)) return true;
  return false;
}

/// Shared machinery: a column table, rows keyed by an entity, synthetic times.
class TableReader : public MetricLineReader {
 protected:
  explicit TableReader(MetricReaderContext* ctx) : ctx_(ctx), metrics_(ctx->recording->metrics) {}

  Status Finish() override {
    if (columns_.empty() && metrics_.rows == 0)
      return DataLossError(ctx_->file + ": no " + ctx_->recording->format + " header or rows");
    return Status::Ok();
  }

  void ReportUnknownColumns(int64_t line_no) {
    std::string unknown;
    for (const auto& c : columns_)
      if (c.role == Role::kIgnored && !IsEntityColumn(c.name) && !IsTimeColumn(c.name) && c.name != "date")
        unknown += (unknown.empty() ? "" : ", ") + c.name;
    if (!unknown.empty())
      ctx_->Issue(IssueSeverity::kInfo, "unused_columns", [&] {
        return fmt::format("{}: columns not used by the analysis: {}", ctx_->Where(line_no), unknown);
      });
  }

  /// Time for a row of `entity`: a new interval starts when an entity repeats.
  TimeNs SyntheticTime(const std::string& entity, int64_t line_no) {
    if (std::find(cycle_.begin(), cycle_.end(), entity) != cycle_.end()) {
      cycle_.clear();
      ++cycle_index_;
    }
    cycle_.push_back(entity);
    metrics_.timestamps_synthetic = true;
    return ctx_->SyntheticTime(cycle_index_, ctx_->options.sample_interval_ns, line_no);
  }

  void AddValue(size_t dev, const DmonColumn& col, std::string_view text, TimeNs t, int64_t line_no) {
    if (metric_text::IsMissing(text)) return;
    auto v = metric_text::ParseNumber(text);
    if (!v) {
      ctx_->Issue(IssueSeverity::kWarning, "bad_value", [&] {
        return fmt::format("{}: column '{}' has unreadable value '{}'; value skipped", ctx_->Where(line_no), col.name, text);
      });
      return;
    }
    if (col.role == Role::kMaxSmClock) {
      metrics_.devices[dev].max_sm_clock_mhz = std::max(metrics_.devices[dev].max_sm_clock_mhz, *v);
      return;
    }
    const double value = *v * col.scale;
    if (col.metric == Metric::kPowerLimitW) metrics_.devices[dev].power_limit_w = value;
    if (col.metric == Metric::kFbTotalBytes) metrics_.devices[dev].memory_total_bytes = static_cast<int64_t>(value);
    metrics_.Add(dev, col.metric, t, value);
  }

  std::optional<size_t> DeviceFor(int index, int mig_instance, int64_t line_no) {
    return ctx_->Device(index, {}, {}, mig_instance, line_no);
  }

  void RowBeforeHeader(int64_t line_no, std::string_view header) {
    ctx_->Issue(IssueSeverity::kWarning, "row_before_header", [&] {
      return fmt::format("{}: data row before the '{}' header; row skipped", ctx_->Where(line_no), header);
    });
  }

  MetricReaderContext* ctx_;
  MetricSet& metrics_;
  std::vector<DmonColumn> columns_;
  std::vector<std::string_view> fields_;
  std::vector<std::string> cycle_;
  int64_t cycle_index_ = 0;
};

/// nvidia-smi pmon: a row per process per GPU per interval ("-" for a GPU with no
/// process, or a reading the driver had no sample of). Each GPU's readings are the
/// sums over its processes in an interval: utilization from their sm % (NVML's
/// per-process utilization: the share of the interval its kernels ran; processes
/// time-slice a GPU, so the sum is the GPU's busy share, capped at 100), memory
/// from their fb. An interval ends where a GPU and process repeat (or at a new
/// time, with -o DT).
class PmonReader {
 public:
  explicit PmonReader(MetricReaderContext* ctx) : ctx_(ctx), metrics_(ctx->recording->metrics) {}

  void Header(const std::vector<std::string_view>& names) {
    columns_.clear();
    for (auto n : names) columns_.push_back(AsciiLower(n));
  }

  void Row(const std::vector<std::string_view>& fields, int64_t line_no) {
    if (fields.size() < columns_.size()) return Short(fields.size(), line_no);  // command names may hold spaces
    std::string gpu, pid, date, time;
    double sm = 0, mem = 0, fb = 0;
    bool has_fb = false;
    for (size_t c = 0; c < columns_.size(); ++c) {
      const std::string_view v = fields[c];
      const std::string& name = columns_[c];
      if (name == "gpu") gpu = std::string(v);
      else if (name == "pid") pid = std::string(v);
      else if (name == "date") date = std::string(v);
      else if (name == "time") time = std::string(v);
      else if (name == "sm" || name == "mem" || name == "fb") {
        const auto number = metric_text::ParseNumber(v);  // "-": no sample, the process ran nothing sampled
        (name == "sm" ? sm : name == "mem" ? mem : fb) += number.value_or(0);
        has_fb = has_fb || (name == "fb" && number.has_value());
      }
    }
    const auto index = metric_text::ParseNumber(gpu);
    if (!index || *index < 0 || *index >= 1e6) {
      ctx_->Issue(IssueSeverity::kWarning, "bad_row", [&] {
        return fmt::format("{}: GPU index '{}' is not a number; row skipped", ctx_->Where(line_no), gpu);
      });
      return;
    }
    const std::string key = gpu + ":" + pid, stamp = date + " " + time;
    if (seen_.count(key) > 0 || (!time.empty() && stamp != stamp_)) Flush();
    if (!time.empty() && stamp != stamp_) NewTime(stamp, line_no);
    seen_.insert(key);
    auto& g = interval_[static_cast<int>(*index)];
    g.sm += sm, g.mem += mem, g.fb += fb, g.has_fb = g.has_fb || has_fb;
    last_line_ = line_no;
  }

  Status Finish(int64_t header_line) {
    Flush();
    if (metrics_.rows == 0) return DataLossError(ctx_->Where(header_line) + ": an nvidia-smi pmon header, and no rows");
    ctx_->Issue(IssueSeverity::kInfo, "pmon_read", [&] {
      return fmt::format(
          "{}: nvidia-smi pmon output (a row per process): each GPU's utilization is the sum of its processes' sm % "
          "in each of {} intervals (capped at 100; '-' reads as 0: no kernel of that process was sampled), its "
          "memory the sum of their fb; an interval ends where a GPU and process repeat{}. A process of another "
          "user or container that pmon cannot see is missing from the sums",
          ctx_->Where(header_line), intervals_, timed_ ? " or the time changes" : " (spaced by --sample-interval)");
    });
    return Status::Ok();
  }

 private:
  struct GpuInterval {
    double sm = 0, mem = 0, fb = 0;
    bool has_fb = false;
  };

  void NewTime(const std::string& stamp, int64_t line_no) {
    stamp_ = stamp;
    const auto t = metric_text::ParseTimestamp(stamp);
    if (!t) {
      if (auto tod = metric_text::ParseTimeOfDay(TrimAsciiSpace(stamp))) {
        time_ = ctx_->anchor_ns - ctx_->anchor_ns % (86400 * kNsPerS) + *tod;
      } else {
        ctx_->BadTimestamp(line_no, stamp);
        return;
      }
    } else {
      time_ = *t;
    }
    timed_ = true;
  }

  void Flush() {
    if (interval_.empty()) return;
    const TimeNs t = timed_ ? time_ : ctx_->SyntheticTime(intervals_, ctx_->options.sample_interval_ns, last_line_);
    if (!timed_) metrics_.timestamps_synthetic = true;
    for (const auto& [index, g] : interval_) {
      auto dev = ctx_->Device(index, {}, {}, -1, last_line_);
      if (!dev) continue;
      metrics_.Add(*dev, Metric::kGpuUtil, t, std::min(100.0, g.sm));
      metrics_.Add(*dev, Metric::kMemCopyUtil, t, std::min(100.0, g.mem));
      if (g.has_fb) metrics_.Add(*dev, Metric::kFbUsedBytes, t, g.fb * kMiB);
    }
    ++metrics_.rows;
    ++intervals_;
    interval_.clear();
    seen_.clear();
  }

  void Short(size_t fields, int64_t line_no) {
    ctx_->Issue(IssueSeverity::kWarning, "bad_row", [&] {
      return fmt::format("{}: {} fields where the pmon header has {}; row skipped", ctx_->Where(line_no), fields,
                         columns_.size());
    });
  }

  MetricReaderContext* ctx_;
  MetricSet& metrics_;
  std::vector<std::string> columns_;
  std::map<int, GpuInterval> interval_;  // the current interval's sums, by GPU index
  std::set<std::string> seen_;           // GPU:pid pairs in the current interval
  std::string stamp_;
  TimeNs time_ = 0;
  bool timed_ = false;
  int64_t intervals_ = 0, last_line_ = 0;
};

class SmiDmonReader final : public TableReader {
 public:
  explicit SmiDmonReader(MetricReaderContext* ctx) : TableReader(ctx) { ctx->recording->format = "nvidia-smi-dmon"; }

  void Line(std::string_view line, int64_t line_no) override {
    std::string_view body = TrimAsciiSpace(line);
    if (body.empty()) return;
    const bool comment = body.front() == '#';
    if (comment) body = TrimAsciiSpace(body.substr(1));
    Split(body);
    // "# gpu pwr ..." names the columns ("gpu, pwr, ..." without '#' in some csv
    // output); "# Idx W C ..." gives units.
    bool names = false;
    for (auto f : fields_)
      if (EqualsLowered(f, "gpu")) names = true;
    if (names) {
      for (auto f : fields_)
        if (EqualsLowered(f, "pid")) pmon_line_ = line_no;
      if (pmon_line_ == line_no) return pmon_.Header(fields_);
      columns_.clear();
      for (auto f : fields_) columns_.push_back(Lookup(kSmiDmonColumns, f));
      ReportUnknownColumns(line_no);
      return;
    }
    if (comment || (!fields_.empty() && EqualsLowered(fields_[0], "idx"))) return;
    if (pmon_line_ > 0) return pmon_.Row(fields_, line_no);
    if (columns_.empty()) return RowBeforeHeader(line_no, "# gpu ...");
    if (fields_.size() != columns_.size()) {
      if (metric_text::IsGpuLost(line))
        ctx_->Issue(IssueSeverity::kError, "gpu_lost", [&] {
          return fmt::format("{}: nvidia-smi reports a lost GPU: {}", ctx_->Where(line_no), body);
        });
      else
        ctx_->Issue(IssueSeverity::kWarning, "bad_row", [&] {
          return fmt::format("{}: {} fields where the header has {}; row skipped", ctx_->Where(line_no),
                             fields_.size(), columns_.size());
        });
      return;
    }
    ++metrics_.rows;
    int index = -1;
    std::string_view date, time;
    for (size_t c = 0; c < columns_.size(); ++c) {
      if (columns_[c].role == Role::kGpuIndex) {
        auto v = metric_text::ParseNumber(fields_[c]);
        if (v && *v >= 0 && *v < 1e6) index = static_cast<int>(*v);
      } else if (columns_[c].role == Role::kDate) {
        date = fields_[c];
      } else if (columns_[c].role == Role::kTime) {
        time = fields_[c];
      }
    }
    TimeNs t = 0;
    if (!time.empty()) {
      std::optional<TimeNs> parsed;
      if (!date.empty()) {
        parsed = metric_text::ParseTimestamp(std::string(date) + " " + std::string(time));
      } else if (auto tod = metric_text::ParseTimeOfDay(time)) {
        // -o T: time of day only. Days roll over when the clock goes back by hours.
        // (bounded: a log that "rolls over" more than 100 years of days is corrupt)
        if (have_last_tod_ && *tod + 12 * 3600 * kNsPerS < last_tod_ && day_offset_ < TimeNs{36500} * 86400 * kNsPerS)
          day_offset_ += 86400 * kNsPerS;
        last_tod_ = *tod;
        have_last_tod_ = true;
        parsed = ctx_->anchor_ns - ctx_->anchor_ns % (86400 * kNsPerS) + day_offset_ + *tod;
      }
      if (!parsed) return ctx_->BadTimestamp(line_no, std::string(date) + " " + std::string(time));
      t = *parsed;
    } else {
      t = SyntheticTime(std::to_string(index), line_no);
    }
    auto dev = DeviceFor(index, -1, line_no);
    if (!dev) return;
    for (size_t c = 0; c < columns_.size(); ++c)
      if (columns_[c].role == Role::kMetric) AddValue(*dev, columns_[c], fields_[c], t, line_no);
  }

  Status Finish() override {
    if (pmon_line_ > 0) return pmon_.Finish(pmon_line_);
    return TableReader::Finish();
  }

 private:
  void Split(std::string_view body) {
    if (body.find(',') != std::string_view::npos) metric_text::SplitTrimmed(body, ',', fields_);
    else metric_text::SplitWhitespace(body, fields_);
  }

  int64_t pmon_line_ = 0;  // the line of a pmon header, if one was seen
  PmonReader pmon_{ctx_};
  TimeNs last_tod_ = 0;
  bool have_last_tod_ = false;
  TimeNs day_offset_ = 0;
};

class DcgmiDmonReader final : public TableReader {
 public:
  explicit DcgmiDmonReader(MetricReaderContext* ctx) : TableReader(ctx) { ctx->recording->format = "dcgmi-dmon"; }

  void Line(std::string_view line, int64_t line_no) override {
    std::string_view body = TrimAsciiSpace(line);
    if (body.empty()) return;
    if (body.front() == '#') {
      metric_text::SplitWhitespace(TrimAsciiSpace(body.substr(1)), fields_);
      if (!fields_.empty() && EqualsLowered(fields_[0], "entity")) {
        csv_ = false;
        columns_.clear();
        for (size_t i = 1; i < fields_.size(); ++i) columns_.push_back(Lookup(kDcgmiColumns, fields_[i]));
        ReportUnknownColumns(line_no);
      }
      return;
    }
    if (EqualsLowered(body, "id")) return;  // second header line
    if (body.find(',') != std::string_view::npos) return CsvLine(body, line_no);
    metric_text::SplitWhitespace(body, fields_);
    if (columns_.empty()) return RowBeforeHeader(line_no, "#Entity ...");
    // "GPU 0 v1 v2 ..." / "GPU-I 3 ..." : entity type, id, then one value per column.
    if (fields_.size() != columns_.size() + 2) return BadRow(line_no, fields_.size() >= 2 ? fields_.size() - 2 : 0);
    auto id = metric_text::ParseNumber(fields_[1]);
    const std::string_view type = fields_[0];
    if (!id || *id < 0 || *id >= 1e6 || (type != "GPU" && type != "GPU-I" && type != "GPU-CI")) {
      ctx_->Issue(IssueSeverity::kInfo, "other_entity", [&] {
        return fmt::format("{}: entity '{} {}' is not a GPU or GPU instance; row skipped", ctx_->Where(line_no), type,
                           fields_[1]);
      });
      return;
    }
    ++metrics_.rows;
    const int entity = static_cast<int>(*id);
    const bool instance = type != "GPU";
    const TimeNs t = SyntheticTime(std::string(type) + " " + std::string(fields_[1]), line_no);
    auto dev = DeviceFor(instance ? -1 : entity, instance ? entity : -1, line_no);
    if (!dev) return;
    for (size_t c = 0; c < columns_.size(); ++c)
      if (columns_[c].role != Role::kIgnored) AddValue(*dev, columns_[c], fields_[c + 2], t, line_no);
  }

 private:
  void BadRow(int64_t line_no, size_t values) {
    ctx_->Issue(IssueSeverity::kWarning, "bad_row", [&] {
      return fmt::format("{}: {} values where the header has {} fields; row skipped", ctx_->Where(line_no), values,
                         columns_.size());
    });
  }

  /// The CSV that scripts around dcgmi (or DCGM's Python bindings) write:
  /// "EntityId,GRACT,FBUSD,TimeStamp" with epoch-second or ISO timestamps.
  void CsvLine(std::string_view body, int64_t line_no) {
    metric_text::SplitTrimmed(body, ',', fields_);
    bool tag = false;
    for (auto f : fields_) tag |= IsDcgmiTag(f);
    if (tag && !metric_text::ParseNumber(fields_[0])) {
      csv_ = true;
      columns_.clear();
      entity_col_ = time_col_ = -1;
      for (size_t i = 0; i < fields_.size(); ++i) {
        if (IsEntityColumn(fields_[i]) && entity_col_ < 0) entity_col_ = static_cast<int>(i);
        else if (IsTimeColumn(fields_[i]) && time_col_ < 0) time_col_ = static_cast<int>(i);
        columns_.push_back(Lookup(kDcgmiColumns, fields_[i]));
      }
      ReportUnknownColumns(line_no);
      return;
    }
    if (!csv_) return RowBeforeHeader(line_no, "EntityId,<tags>,TimeStamp");
    if (fields_.size() != columns_.size()) return BadRow(line_no, fields_.size());
    int entity = 0;
    if (entity_col_ >= 0) {
      auto id = metric_text::ParseNumber(fields_[static_cast<size_t>(entity_col_)]);
      if (!id || *id < 0 || *id >= 1e6) {
        ctx_->Issue(IssueSeverity::kWarning, "bad_value", [&] {
          return fmt::format("{}: unreadable entity id '{}'; row skipped", ctx_->Where(line_no),
                             fields_[static_cast<size_t>(entity_col_)]);
        });
        return;
      }
      entity = static_cast<int>(*id);
    }
    TimeNs t;
    if (time_col_ >= 0) {
      auto parsed = metric_text::ParseTimestamp(fields_[static_cast<size_t>(time_col_)]);
      if (!parsed) return ctx_->BadTimestamp(line_no, fields_[static_cast<size_t>(time_col_)]);
      t = *parsed;
    } else {
      t = SyntheticTime(std::to_string(entity), line_no);
    }
    ++metrics_.rows;
    auto dev = DeviceFor(entity, -1, line_no);
    if (!dev) return;
    for (size_t c = 0; c < columns_.size(); ++c)
      if (columns_[c].role != Role::kIgnored) AddValue(*dev, columns_[c], fields_[c], t, line_no);
  }

  bool csv_ = false;
  int entity_col_ = -1;
  int time_col_ = -1;
};

}  // namespace

std::unique_ptr<MetricLineReader> MakeSmiDmonReader(MetricReaderContext* ctx) {
  return std::make_unique<SmiDmonReader>(ctx);
}
std::unique_ptr<MetricLineReader> MakeDcgmiDmonReader(MetricReaderContext* ctx) {
  return std::make_unique<DcgmiDmonReader>(ctx);
}

bool IsDcgmiFieldTag(std::string_view name) { return IsDcgmiTag(name); }

}  // namespace gputriage
