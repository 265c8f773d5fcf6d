// nvidia-smi -q: the indented "Key : Value" report of each GPU. It gives device
// facts (model, architecture, power limit, maximum clocks, memory, MIG mode) and
// one sample of the live readings at the report's Timestamp.
#include <cmath>

#include <fmt/format.h>

#include "src/sources/metrics/metric_readers.h"
#include "src/sources/metrics/metric_text.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

struct ReasonEntry {
  std::string_view key;
  uint64_t bit;
};
constexpr ReasonEntry kReasons[] = {
    {"Idle", clock_event::kGpuIdle},
    {"GPU Idle", clock_event::kGpuIdle},
    {"Applications Clocks Setting", clock_event::kApplicationsClocksSetting},
    {"SW Power Cap", clock_event::kSwPowerCap},
    {"HW Slowdown", clock_event::kHwSlowdown},
    {"HW Thermal Slowdown", clock_event::kHwThermalSlowdown},
    {"HW Power Brake Slowdown", clock_event::kHwPowerBrakeSlowdown},
    {"Sync Boost", clock_event::kSyncBoost},
    {"SW Thermal Slowdown", clock_event::kSwThermalSlowdown},
    {"Display Clock Setting", clock_event::kDisplayClockSetting},
};

class SmiQueryReader final : public MetricLineReader {
 public:
  explicit SmiQueryReader(MetricReaderContext* ctx) : ctx_(ctx), metrics_(ctx->recording->metrics) {
    ctx->recording->format = "nvidia-smi-q";
  }

  void Line(std::string_view line, int64_t line_no) override {
    if (TrimAsciiSpace(line).empty()) return;
    if (Contains(line, "NVSMI LOG")) {
      FlushGpu();
      timestamp_ = 0;
      gpu_position_ = 0;
      return;
    }
    size_t indent = 0;
    while (indent < line.size() && line[indent] == ' ') ++indent;
    const std::string_view body = TrimAsciiSpace(line);
    const size_t colon = body.find(" : ");
    const bool has_value = colon != std::string_view::npos || (body.size() > 2 && EndsWith(body, " :"));
    std::string_view key = TrimAsciiSpace(has_value ? body.substr(0, colon == std::string_view::npos ? body.size() - 2 : colon) : body);
    std::string_view value = colon == std::string_view::npos ? std::string_view{} : TrimAsciiSpace(body.substr(colon + 3));
    // Section headers have no value; nesting is by indentation.
    while (!sections_.empty() && sections_.back().indent >= indent) sections_.pop_back();
    if (!has_value) {
      if (indent == 0 && StartsWith(key, "GPU ")) {
        FlushGpu();
        StartGpu(key.substr(4), line_no);
        return;
      }
      sections_.push_back({indent, std::string(key)});
      return;
    }
    if (indent == 0) {
      if (key == "Timestamp") {
        if (auto t = metric_text::ParseTimestamp(value)) timestamp_ = *t;
        else
          ctx_->Issue(IssueSeverity::kWarning, "bad_timestamp", [&] {
            return fmt::format("{}: unreadable Timestamp '{}'", ctx_->Where(line_no), value);
          });
      } else if (key == "Driver Version") {
        driver_ = std::string(value);
      }
      return;
    }
    if (!device_) return;
    Field(Section(), key, value, line_no);
  }

  Status Finish() override {
    FlushGpu();
    if (metrics_.devices.empty()) return DataLossError(ctx_->file + ": no 'GPU <bus id>' section in nvidia-smi -q output");
    return Status::Ok();
  }

 private:
  struct SectionEntry {
    size_t indent;
    std::string name;
  };

  std::string_view Section() const { return sections_.empty() ? std::string_view{} : std::string_view(sections_.back().name); }
  std::string_view Parent() const {
    return sections_.size() < 2 ? std::string_view{} : std::string_view(sections_[sections_.size() - 2].name);
  }

  void StartGpu(std::string_view bus_id, int64_t line_no) {
    sections_.clear();
    auto found = ctx_->Device(gpu_position_++, {}, TrimAsciiSpace(bus_id), -1, line_no);
    if (!found) return;
    device_ = found;
    ++metrics_.rows;
    reasons_ = 0;
    reasons_seen_ = false;
    auto& d = metrics_.devices[*device_];
    if (d.driver_version.empty()) d.driver_version = driver_;
    if (timestamp_ == 0) {
      metrics_.timestamps_synthetic = true;
      timestamp_ = ctx_->anchor_ns;
    }
  }

  void FlushGpu() {
    if (device_ && reasons_seen_) metrics_.Add(*device_, Metric::kClockEventReasons, timestamp_, static_cast<double>(reasons_));
    device_.reset();
  }

  void Sample(Metric m, std::string_view value, double scale = 1.0) {
    if (metric_text::IsMissing(value)) return;
    auto v = metric_text::ParseValueWithUnit(value);
    if (!v) return;
    metrics_.Add(*device_, m, timestamp_, v->value * scale);
  }

  void Field(std::string_view section, std::string_view key, std::string_view value, int64_t line_no) {
    MetricDevice& d = metrics_.devices[*device_];
    (void)line_no;
    if (section.empty()) {
      if (key == "Product Name") d.name = std::string(value);
      else if (key == "Product Architecture") d.architecture = std::string(value);
      else if (key == "GPU UUID") d.uuid = std::string(value);
      else if (key == "Minor Number") {
        if (auto v = metric_text::ParseNumber(value)) d.labels["minor_number"] = std::string(value);
      }
      return;
    }
    if (section == "MIG Mode" && key == "Current") {
      d.mig_mode = value == "Enabled";
    } else if (section == "Driver Model" && key == "Current") {
      if (!metric_text::IsMissing(value)) d.labels["driver_model"] = std::string(value);  // WDDM / TCC on Windows
    } else if (section == "FB Memory Usage") {
      auto v = metric_text::ParseValueWithUnit(value);
      if (!v) return;
      const double bytes = metric_text::MemoryBytes(*v);
      if (key == "Total") {
        d.memory_total_bytes = static_cast<int64_t>(bytes);
        metrics_.Add(*device_, Metric::kFbTotalBytes, timestamp_, bytes);
      } else if (key == "Used") {
        metrics_.Add(*device_, Metric::kFbUsedBytes, timestamp_, bytes);
      } else if (key == "Free") {
        metrics_.Add(*device_, Metric::kFbFreeBytes, timestamp_, bytes);
      }
    } else if (section == "Utilization") {
      if (key == "Gpu" || key == "GPU") Sample(Metric::kGpuUtil, value);
      else if (key == "Memory") Sample(Metric::kMemCopyUtil, value);
      else if (key == "Encoder") Sample(Metric::kEncoderUtil, value);
      else if (key == "Decoder") Sample(Metric::kDecoderUtil, value);
    } else if (section == "GPU Power Readings" || section == "Power Readings") {
      // Drivers before R535 print "Power Draw"/"Power Limit"; later ones split
      // average/instant draw and current/requested/default limits.
      if (key == "Power Draw" || key == "Average Power Draw") {
        if (!power_sampled_for_ || *power_sampled_for_ != *device_) {
          Sample(Metric::kPowerW, value);
          power_sampled_for_ = device_;
        }
      } else if (key == "Current Power Limit" || key == "Power Limit" || key == "Enforced Power Limit") {
        if (auto v = metric_text::ParseValueWithUnit(value); v && !metric_text::IsMissing(value)) {
          d.power_limit_w = v->value;
          metrics_.Add(*device_, Metric::kPowerLimitW, timestamp_, v->value);
        }
      }
    } else if (section == "Clocks" && key == "SM") {
      Sample(Metric::kSmClockMHz, value);
    } else if (section == "Clocks" && key == "Memory") {
      Sample(Metric::kMemClockMHz, value);
    } else if (section == "Max Clocks" && key == "SM") {
      if (auto v = metric_text::ParseValueWithUnit(value)) d.max_sm_clock_mhz = v->value;
    } else if (section == "Temperature") {
      if (key == "GPU Current Temp") Sample(Metric::kGpuTempC, value);
      else if (key == "Memory Current Temp") Sample(Metric::kMemTempC, value);
    } else if (section == "Clocks Event Reasons" || section == "Clocks Throttle Reasons" ||
               ((section == "HW Slowdown") &&
                (Parent() == "Clocks Event Reasons" || Parent() == "Clocks Throttle Reasons"))) {
      for (const auto& r : kReasons)
        if (key == r.key) {
          reasons_seen_ = true;
          if (value == "Active") reasons_ |= r.bit;
        }
    } else if (section == "PCI") {
      // "Rx Throughput : 329 KB/s" (NVML reports KB/s)
      if (key == "Rx Throughput" || key == "Tx Throughput") {
        auto v = metric_text::ParseValueWithUnit(value);
        if (v && !metric_text::IsMissing(value)) {
          const double scale = metric_text::BytesPerUnit(v->unit);
          metrics_.Add(*device_, key[0] == 'R' ? Metric::kPcieRxBytesPerS : Metric::kPcieTxBytesPerS, timestamp_,
                       v->value * (scale > 0 ? scale : 1e3));
        }
      }
    }
  }

  MetricReaderContext* ctx_;
  MetricSet& metrics_;
  std::vector<SectionEntry> sections_;
  std::optional<size_t> device_;
  std::optional<size_t> power_sampled_for_;
  TimeNs timestamp_ = 0;
  std::string driver_;
  int gpu_position_ = 0;
  uint64_t reasons_ = 0;
  bool reasons_seen_ = false;
};

}  // namespace

std::unique_ptr<MetricLineReader> MakeSmiQueryReader(MetricReaderContext* ctx) {
  return std::make_unique<SmiQueryReader>(ctx);
}

}  // namespace gputriage
