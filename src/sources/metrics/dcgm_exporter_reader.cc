// dcgm-exporter /metrics (Prometheus text exposition), one scrape or a series.
//
// Both name generations are read and their units normalised:
//   legacy      DCGM_FI_DEV_GPU_UTIL (%)   DCGM_FI_PROF_SM_ACTIVE (0-1)  DCGM_FI_DEV_SM_CLOCK (MHz)
//   DCGM 4.6+   DCGM_FI_DEV_GPU_UTIL_RATIO DCGM_FI_PROF_SM_UTIL_RATIO    ..._HZ, ..._BYTES, ..._JOULES
//   1.x (-o)    dcgm_gpu_utilization       dcgm_fi_prof_dram_active
// The unit comes from the name's suffix, else the family's HELP text ("(in MHz)"),
// else the legacy default. DCGM blank sentinels ("not supported") are missing
// values, not readings.
//
// Scrape times: a sample's own timestamp (ms) when present; else a comment line
// "# TIME <timestamp>" written between scrapes (e.g. by a curl loop); else a new
// scrape starts when a series repeats, spaced by the sampling interval.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "gputriage/markers.hpp"
#include "src/sources/metrics/metric_readers.h"
#include "src/sources/metrics/metric_text.h"
#include "src/util/strings.h"

namespace gputriage {
namespace {

enum class Unit { kNone, kPercent, kRatio, kMHz, kHz, kMiB, kBytes, kMilliJoule, kJoule, kWatt, kCelsius, kBitmask, kBytesPerS };

struct StemEntry {
  std::string_view stem;
  Metric metric;
  Unit legacy_unit;  // the unit when neither the name nor HELP says
};

// Stems after removing the DCGM_FI_DEV_/DCGM_FI_PROF_/dcgm_ prefixes and unit suffixes.
constexpr StemEntry kStems[] = {
    {"GPU_UTIL", Metric::kGpuUtil, Unit::kPercent},
    {"GPU_UTILIZATION", Metric::kGpuUtil, Unit::kPercent},  // 1.x
    {"MEM_COPY_UTIL", Metric::kMemCopyUtil, Unit::kPercent},
    {"MEM_COPY_UTILIZATION", Metric::kMemCopyUtil, Unit::kPercent},
    {"ENC_UTIL", Metric::kEncoderUtil, Unit::kPercent},
    {"ENC_UTILIZATION", Metric::kEncoderUtil, Unit::kPercent},
    {"DEC_UTIL", Metric::kDecoderUtil, Unit::kPercent},
    {"DEC_UTILIZATION", Metric::kDecoderUtil, Unit::kPercent},
    {"GR_ENGINE_ACTIVE", Metric::kGrEngineActive, Unit::kRatio},
    {"GR_ENGINE_UTIL", Metric::kGrEngineActive, Unit::kRatio},
    {"SM_ACTIVE", Metric::kSmActive, Unit::kRatio},
    {"SM_UTIL", Metric::kSmActive, Unit::kRatio},
    {"SM_OCCUPANCY", Metric::kSmOccupancy, Unit::kRatio},
    {"PIPE_TENSOR_ACTIVE", Metric::kTensorActive, Unit::kRatio},
    {"TENSOR_UTIL", Metric::kTensorActive, Unit::kRatio},
    {"DRAM_ACTIVE", Metric::kDramActive, Unit::kRatio},
    {"DRAM_UTIL", Metric::kDramActive, Unit::kRatio},
    {"PIPE_FP64_ACTIVE", Metric::kFp64Active, Unit::kRatio},
    {"FP64_UTIL", Metric::kFp64Active, Unit::kRatio},
    {"PIPE_FP32_ACTIVE", Metric::kFp32Active, Unit::kRatio},
    {"FP32_UTIL", Metric::kFp32Active, Unit::kRatio},
    {"PIPE_FP16_ACTIVE", Metric::kFp16Active, Unit::kRatio},
    {"FP16_UTIL", Metric::kFp16Active, Unit::kRatio},
    {"PCIE_RX", Metric::kPcieRxBytesPerS, Unit::kBytesPerS},
    {"PCIE_TX", Metric::kPcieTxBytesPerS, Unit::kBytesPerS},
    {"NVLINK_RX", Metric::kNvlinkRxBytesPerS, Unit::kBytesPerS},
    {"NVLINK_TX", Metric::kNvlinkTxBytesPerS, Unit::kBytesPerS},
    {"POWER_USAGE", Metric::kPowerW, Unit::kWatt},
    {"BOARD_POWER", Metric::kPowerW, Unit::kWatt},
    {"POWER_MGMT_LIMIT", Metric::kPowerLimitW, Unit::kWatt},
    {"ENFORCED_POWER_LIMIT", Metric::kPowerLimitW, Unit::kWatt},
    {"SM_CLOCK", Metric::kSmClockMHz, Unit::kMHz},
    {"MEM_CLOCK", Metric::kMemClockMHz, Unit::kMHz},
    {"MEMORY_CLOCK", Metric::kMemClockMHz, Unit::kMHz},
    {"GPU_TEMP", Metric::kGpuTempC, Unit::kCelsius},
    {"MEMORY_TEMP", Metric::kMemTempC, Unit::kCelsius},
    {"FB_USED", Metric::kFbUsedBytes, Unit::kMiB},
    {"FB_FREE", Metric::kFbFreeBytes, Unit::kMiB},
    {"FB_TOTAL", Metric::kFbTotalBytes, Unit::kMiB},
    {"FB_CAPACITY", Metric::kFbTotalBytes, Unit::kBytes},
    {"TOTAL_ENERGY_CONSUMPTION", Metric::kEnergyJ, Unit::kMilliJoule},
    {"CLOCK_THROTTLE_REASONS", Metric::kClockEventReasons, Unit::kBitmask},
    {"CLOCKS_EVENT_REASONS", Metric::kClockEventReasons, Unit::kBitmask},
};

struct Family {
  bool known = false;
  Metric metric = Metric::kCount;
  double scale = 1;
  bool max_sm_clock = false;  // DCGM_FI_DEV_MAX_SM_CLOCK: the device's maximum, kept as a fact
};

Unit UnitFromHelp(std::string_view help) {
  if (Contains(help, "(in %)")) return Unit::kPercent;
  if (Contains(help, "(in MHz)")) return Unit::kMHz;
  if (Contains(help, "(in Hz)")) return Unit::kHz;
  if (Contains(help, "(in MiB)")) return Unit::kMiB;
  if (Contains(help, "(in bytes)") || Contains(help, "(in B)")) return Unit::kBytes;
  if (Contains(help, "(in mJ)")) return Unit::kMilliJoule;
  if (Contains(help, "(in J)")) return Unit::kJoule;
  if (Contains(help, "(in W)")) return Unit::kWatt;
  if (Contains(help, "(in C)")) return Unit::kCelsius;
  return Unit::kNone;
}

double Scale(Unit u) {
  switch (u) {
    case Unit::kRatio: return 100.0;
    case Unit::kHz: return 1e-6;
    case Unit::kMiB: return 1024.0 * 1024.0;
    case Unit::kMilliJoule: return 1e-3;
    default: return 1.0;
  }
}

Family Classify(std::string_view name, std::string_view help) {
  std::string base = [&] {
    std::string upper(name);
    for (auto& c : upper) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    return upper;
  }();
  for (std::string_view prefix : {"DCGM_FI_DEV_", "DCGM_FI_PROF_", "DCGM_FI_PROF_", "DCGM_"}) {
    if (StartsWith(base, prefix)) {
      base.erase(0, prefix.size());
      break;
    }
  }
  if (StartsWith(base, "FI_PROF_")) base.erase(0, 8);  // dcgm_fi_prof_* (1.x)
  // Unit suffixes of the DCGM 4.6/4.7 names.
  Unit suffix_unit = Unit::kNone;
  struct Suffix {
    std::string_view text;
    Unit unit;
  };
  static constexpr Suffix kSuffixes[] = {{"_RATIO", Unit::kRatio},   {"_MHZ", Unit::kMHz},     {"_HZ", Unit::kHz},
                                         {"_JOULES", Unit::kJoule},  {"_WATTS", Unit::kWatt},  {"_CELSIUS", Unit::kCelsius},
                                         {"_PERCENT", Unit::kPercent}, {"_MIB", Unit::kMiB},   {"_BYTES", Unit::kBytes}};
  for (const auto& s : kSuffixes) {
    if (EndsWith(base, s.text)) {
      suffix_unit = s.unit;
      base.resize(base.size() - s.text.size());
      break;
    }
  }
  Family f;
  if (base == "MAX_SM_CLOCK") {
    f.known = true;
    f.max_sm_clock = true;
    f.metric = Metric::kSmClockMHz;
    f.scale = Scale(suffix_unit == Unit::kNone ? Unit::kMHz : suffix_unit);
    return f;
  }
  for (const auto& e : kStems) {
    if (base != e.stem) continue;
    if (e.metric == Metric::kFbUsedBytes && suffix_unit == Unit::kPercent) return f;  // FB_USED_PERCENT: derived
    Unit unit = e.legacy_unit;
    if (suffix_unit != Unit::kNone) unit = suffix_unit;
    else if (e.legacy_unit != Unit::kRatio) {  // DCP help texts said "(in %)" for ratios until #346
      const Unit from_help = UnitFromHelp(help);
      if (from_help != Unit::kNone) unit = from_help;
    }
    // PCIe/NVLink "_BYTES" names are rates in bytes per second.
    if (e.legacy_unit == Unit::kBytesPerS) unit = Unit::kBytesPerS;
    f.known = true;
    f.metric = e.metric;
    f.scale = Scale(unit);
    return f;
  }
  return f;
}

bool IsDcgmBlank(double v) {
  // dcgm_structs.h: DCGM_INT64_BLANK 0x7ffffffffffffff0 (+1 not found, +2 not
  // supported, +3 no permission), DCGM_FP64_BLANK 2^47 (+1..+3), DCGM_INT32_BLANK 0x7ffffff0.
  if (v >= 9.2233720368547e18) return true;
  if (v >= 140737488355328.0 && v <= 140737488355331.0) return true;
  if (v >= 2147483632.0 && v <= 2147483635.0) return true;
  return false;
}

// Labels kept for attribution (Kubernetes and the exporter's own).
bool IsAttributionLabel(std::string_view k) {
  static constexpr std::string_view kKeep[] = {
      "pod", "namespace", "container", "pod_uid", "pod_name", "pod_namespace", "container_name", "exported_pod",
      "exported_namespace", "exported_container", "hpc_job", "vgpu", "dra_claim_name", "dra_claim_namespace",
      "job", "instance", "node", "cluster"};
  for (auto keep : kKeep)
    if (k == keep) return true;
  return false;
}

std::string CanonicalAttributionKey(std::string_view k) {
  // Old-namespace and Prometheus-renamed labels mean the same pod/namespace/container.
  if (k == "pod_name" || k == "exported_pod") return "pod";
  if (k == "pod_namespace" || k == "exported_namespace") return "namespace";
  if (k == "container_name" || k == "exported_container") return "container";
  return std::string(k);
}

class DcgmExporterReader final : public MetricLineReader {
 public:
  explicit DcgmExporterReader(MetricReaderContext* ctx) : ctx_(ctx), metrics_(ctx->recording->metrics) {
    ctx->recording->format = "dcgm-exporter";
  }

  void Line(std::string_view line, int64_t line_no) override {
    std::string_view body = TrimAsciiSpace(line);
    if (body.empty()) return;
    if (body.front() == '#') {
      Comment(body, line_no);
      return;
    }
    Sample(body, line_no);
  }

  Status Finish() override {
    std::sort(ctx_->recording->marked_steps.begin(), ctx_->recording->marked_steps.end(),
              [](const MarkedStep& a, const MarkedStep& b) { return a.span.start < b.span.start; });
    if (metrics_.devices.empty() && !ctx_->recording->marked_steps.empty()) {
      // An exported run recorded without GPU metrics: its steps are the recording.
      ctx_->recording->format = "step-markers";
      ctx_->Issue(IssueSeverity::kInfo, "gpu_metrics_unavailable", [&] {
        return ctx_->file + ": the run was recorded without GPU metrics: the diagnosis rests on its step markers alone";
      });
      return Status::Ok();
    }
    if (samples_seen_ == 0 && families_seen_ == 0)
      return DataLossError(ctx_->file + ": no Prometheus samples (expected dcgm-exporter /metrics text)");
    if (metrics_.devices.empty())
      ctx_->Issue(IssueSeverity::kWarning, "no_dcgm_series",
                  [&] { return ctx_->file + ": no DCGM GPU series (DCGM_FI_* with a gpu label) in the scrape"; });
    return Status::Ok();
  }

  /// For a scrape directory: the next file is a new scrape at `t`.
  void StartScrape(TimeNs t) {
    scrape_time_ = t;
    have_scrape_time_ = true;
    scrape_counted_ = false;
    ResetSeen();
  }

 private:
  void ResetSeen() {
    for (auto& m : seen_) m = 0;
  }

  /// "# gputriage_step number pid start_ns end_ns samples tokens flops data_ns
  /// forward_ns backward_ns optimizer_ns communication_ns checkpoint_ns other_ns device_ns
  /// [copy_ns [forward_device_ns backward_device_ns optimizer_device_ns copy_device_ns
  /// [sync_arrival_ns sync_release_ns [host_rss_bytes host_rss_peak_bytes memory_device
  /// device_allocated_bytes device_peak_bytes device_reserved_bytes alloc_retries alloc_ooms]]]]"
  /// (copy_ns since the copy phase, the phases' device times since those, the
  /// arrival times since ranks, memory since it is sampled: older exports have
  /// 15, 16, 20 or 22 fields)
  void ExportedStep(std::string_view fields, int64_t line_no) {
    if (StartsWith(fields, "fields:")) return;  // the header naming the columns
    std::vector<std::string_view> parts;
    metric_text::SplitWhitespace(fields, parts);
    MarkedStep step;
    bool ok = parts.size() == 15 || parts.size() == 16 || parts.size() == 20 || parts.size() == 22 || parts.size() == 30;
    std::array<int64_t, 30> v{};
    v[24] = -1;  // no memory device
    double flops = 0;
    for (size_t i = 0; ok && i < parts.size(); ++i) {
      if (i == 6) {
        const auto parsed = metric_text::ParseNumber(parts[i]);
        ok = parsed && std::isfinite(*parsed) && *parsed >= 0;
        flops = parsed.value_or(0);
        continue;
      }
      const auto [end, err] = std::from_chars(parts[i].data(), parts[i].data() + parts[i].size(), v[i]);
      ok = err == std::errc() && end == parts[i].data() + parts[i].size() &&
           (i == 2 || i == 3 || v[i] >= 0 || (i == 24 && v[i] == -1));
    }
    ok = ok && v[3] >= v[2] && v[1] <= UINT32_MAX;
    if (!ok || ctx_->recording->marked_steps.size() >= kMaxExportedSteps) {
      ctx_->Issue(IssueSeverity::kWarning, "bad_step", [&] {
        return fmt::format("{}: an exported step that cannot be read: '{}'", ctx_->Where(line_no), fields.substr(0, 200));
      });
      return;
    }
    step.number = v[0];
    step.pid = static_cast<uint32_t>(v[1]);
    step.span = gputriage::Interval{v[2], v[3]};
    step.samples = v[4];
    step.tokens = v[5];
    step.flops = flops;
    for (size_t phase = 1; phase <= 7; ++phase) step.phase_ns[phase] = v[6 + phase];
    step.device_ns = v[14];
    step.phase_ns[kCopySlot] = v[15];
    for (size_t i = 0; i < kDeviceTimedSlots.size(); ++i)
      step.phase_device_ns[static_cast<size_t>(kDeviceTimedSlots[i])] = v[16 + i];
    step.sync_arrival = v[20];
    step.sync_release = v[21];
    step.host_rss_bytes = v[22];
    step.host_rss_peak_bytes = v[23];
    step.memory_device = v[24] <= (1 << 20) ? static_cast<int>(v[24]) : -1;
    step.device_allocated_bytes = v[25];
    step.device_peak_bytes = v[26];
    step.device_reserved_bytes = v[27];
    step.alloc_retries = v[28];
    step.alloc_ooms = v[29];
    ctx_->recording->marked_steps.push_back(step);
  }

  /// "# gputriage_process pid rank local_rank world_size HOST SOURCE" (HOST and
  /// SOURCE "-" when unknown): who a marked process was in a distributed run.
  void ExportedProcess(std::string_view fields, int64_t line_no) {
    std::vector<std::string_view> parts;
    metric_text::SplitWhitespace(fields, parts);
    std::array<int64_t, 4> v{};
    bool ok = parts.size() == 6 && ctx_->recording->process_ranks.size() < kMaxExportedProcesses;
    for (size_t i = 0; ok && i < 4; ++i) {
      const auto [end, err] = std::from_chars(parts[i].data(), parts[i].data() + parts[i].size(), v[i]);
      ok = err == std::errc() && end == parts[i].data() + parts[i].size() && v[i] >= (i == 0 ? 1 : -1) &&
           v[i] <= (i == 0 ? int64_t{UINT32_MAX} : int64_t{1} << 24);
    }
    if (!ok) {
      ctx_->Issue(IssueSeverity::kWarning, "bad_process", [&] {
        return fmt::format("{}: an exported process rank that cannot be read: '{}'", ctx_->Where(line_no),
                           fields.substr(0, 200));
      });
      return;
    }
    ProcessRank r;
    r.pid = static_cast<uint32_t>(v[0]);
    r.rank = static_cast<int>(v[1]);
    r.local_rank = static_cast<int>(v[2]);
    r.world_size = static_cast<int>(v[3]);
    if (parts[4] != "-") r.host = std::string(parts[4]);
    if (parts[5] != "-") r.source = std::string(parts[5]);
    ctx_->recording->process_ranks.push_back(std::move(r));
  }

  /// "# gputriage_setting KEY \"VALUE\"" (the value escaped as a label value).
  void ExportedSetting(std::string_view fields, int64_t line_no) {
    const size_t space = fields.find(' ');
    const std::string_view key = fields.substr(0, space);
    std::string_view quoted = space == std::string_view::npos ? std::string_view() : TrimAsciiSpace(fields.substr(space));
    if (key.empty() || quoted.size() < 2 || quoted.front() != '"' || quoted.back() != '"' ||
        ctx_->recording->metadata.size() >= kMaxExportedSettings) {
      ctx_->Issue(IssueSeverity::kWarning, "bad_setting", [&] {
        return fmt::format("{}: an exported setting that cannot be read: '{}'", ctx_->Where(line_no), fields.substr(0, 200));
      });
      return;
    }
    quoted = quoted.substr(1, quoted.size() - 2);
    std::string value;
    for (size_t i = 0; i < quoted.size(); ++i) {
      if (quoted[i] == '\\' && i + 1 < quoted.size()) {
        ++i;
        value += quoted[i] == 'n' ? '\n' : quoted[i];
      } else {
        value += quoted[i];
      }
    }
    ctx_->recording->metadata.try_emplace(std::string(key), std::move(value));
  }

  static constexpr size_t kMaxExportedSteps = 10'000'000;
  static constexpr size_t kMaxExportedSettings = 256;
  static constexpr size_t kMaxExportedProcesses = 65536;

  void Comment(std::string_view body, int64_t line_no) {
    std::string_view rest = TrimAsciiSpace(body.substr(1));
    // A `gputriage export` carries the run's steps and settings as comments.
    if (StartsWith(rest, "gputriage_step ")) return ExportedStep(rest.substr(15), line_no);
    if (StartsWith(rest, "gputriage_setting ")) return ExportedSetting(rest.substr(18), line_no);
    if (StartsWith(rest, "gputriage_process ")) return ExportedProcess(rest.substr(18), line_no);
    if (StartsWith(rest, "HELP ")) {
      rest = TrimAsciiSpace(rest.substr(5));
      const size_t sp = rest.find(' ');
      const std::string name(rest.substr(0, sp));
      if (help_.size() < kMaxFamilies || help_.count(name))
        help_[name] = sp == std::string_view::npos ? std::string() : std::string(TrimAsciiSpace(rest.substr(sp + 1)));
      ++families_seen_;
      return;
    }
    if (StartsWith(rest, "TYPE ") || StartsWith(rest, "EOF") || StartsWith(rest, "UNIT ")) return;
    // "# TIME 2026-07-14T08:12:38Z" between scrapes.
    for (std::string_view marker : {"TIME ", "TIME: ", "SCRAPE ", "scrape_time ", "scrape_time=", "time: "}) {
      if (StartsWith(rest, marker)) {
        if (auto t = metric_text::ParseTimestamp(rest.substr(marker.size()))) {
          StartScrape(*t);
        } else {
          ctx_->Issue(IssueSeverity::kWarning, "bad_timestamp", [&] {
            return fmt::format("{}: unreadable scrape time '{}'", ctx_->Where(line_no), rest.substr(marker.size()));
          });
        }
        return;
      }
    }
  }

  const Family& FamilyFor(std::string_view name) {
    auto it = families_.find(name);
    if (it != families_.end()) return it->second;
    auto h = help_.find(std::string(name));
    Family f = Classify(name, h == help_.end() ? std::string_view{} : std::string_view(h->second));
    if (families_.size() >= kMaxFamilies) {  // bounded: a hostile file cannot grow the cache
      uncached_ = f;
      return uncached_;
    }
    return families_.emplace(std::string(name), f).first->second;
  }

  void Sample(std::string_view body, int64_t line_no) {
    // name{labels} value [timestamp]
    size_t i = 0;
    while (i < body.size() && body[i] != '{' && body[i] != ' ' && body[i] != '\t') ++i;
    const std::string_view name = body.substr(0, i);
    labels_.clear();
    if (i < body.size() && body[i] == '{') {
      ++i;
      while (true) {
        while (i < body.size() && (body[i] == ' ' || body[i] == ',')) ++i;
        if (i >= body.size()) return Bad(line_no, "unterminated label set");
        if (body[i] == '}') {
          ++i;
          break;
        }
        const size_t eq = body.find('=', i);
        if (eq == std::string_view::npos || eq + 1 >= body.size() || body[eq + 1] != '"')
          return Bad(line_no, "label without =\"value\"");
        const std::string_view key = TrimAsciiSpace(body.substr(i, eq - i));
        std::string value;
        size_t j = eq + 2;
        bool closed = false;
        while (j < body.size()) {
          const char c = body[j];
          if (c == '\\' && j + 1 < body.size()) {
            const char n = body[j + 1];
            value.push_back(n == 'n' ? '\n' : n);
            j += 2;
            continue;
          }
          if (c == '"') {
            closed = true;
            ++j;
            break;
          }
          value.push_back(c);
          ++j;
        }
        if (!closed) return Bad(line_no, "unterminated label value");
        labels_.emplace_back(key, std::move(value));
        i = j;
      }
    }
    std::vector<std::string_view> rest;
    metric_text::SplitWhitespace(body.substr(i), rest);
    if (name.empty() || rest.empty() || rest.size() > 2) return Bad(line_no, "expected 'name{labels} value [timestamp]'");
    ++samples_seen_;
    const Family& family = FamilyFor(name);
    if (!family.known) return;
    std::optional<double> value = metric_text::ParseNumber(rest[0]);
    if (!value) {
      if (rest[0] == "NaN" || rest[0] == "+Inf" || rest[0] == "-Inf") return;
      return Bad(line_no, fmt::format("unreadable value '{}'", rest[0]));
    }
    std::optional<TimeNs> sample_time;
    if (rest.size() == 2) {
      auto ms = metric_text::ParseNumber(rest[1]);
      // Milliseconds since the epoch, up to the year 2200 (int64 nanoseconds stay in range).
      if (!ms || *ms < 0 || *ms > 7.2e12) return Bad(line_no, fmt::format("unreadable sample timestamp '{}'", rest[1]));
      sample_time = static_cast<TimeNs>(*ms) * kNsPerMs;
    }
    auto dev = DeviceFromLabels(line_no);
    if (!dev) return;
    if (IsDcgmBlank(*value)) {
      ctx_->Issue(IssueSeverity::kInfo, "dcgm_blank_value", [&] {
        return fmt::format("{}: {} = {} is a DCGM blank sentinel (not supported / not found): read as missing",
                           ctx_->Where(line_no), name, rest[0]);
      });
      return;
    }
    TimeNs t;
    if (sample_time) {
      t = *sample_time;
    } else {
      // The same series again means the next scrape.
      if (*dev >= seen_.size()) seen_.resize(*dev + 1, 0);
      const uint32_t bit = uint32_t{1} << static_cast<int>(family.metric);
      if (seen_[*dev] & bit) {
        ResetSeen();
        if (have_scrape_time_) {
          ctx_->Issue(IssueSeverity::kWarning, "repeated_series", [&] {
            return fmt::format("{}: {} repeats within one timed scrape; taken as the next interval", ctx_->Where(line_no), name);
          });
        }
        scrape_time_ = ctx_->Advance(scrape_time_, 1, Interval(), line_no);
        if (!have_scrape_time_) metrics_.timestamps_synthetic = true;
        scrape_counted_ = false;
      }
      seen_[*dev] |= bit;
      if (!have_scrape_time_ && scrape_time_ == 0) scrape_time_ = ctx_->anchor_ns;
      t = scrape_time_;
    }
    if (!scrape_counted_) {  // rows = scrapes
      ++metrics_.rows;
      scrape_counted_ = true;
    }
    double v = *value * family.scale;
    MetricDevice& d = metrics_.devices[*dev];
    if (family.max_sm_clock) {  // a device fact, not a series
      d.max_sm_clock_mhz = std::max(d.max_sm_clock_mhz, v);
      return;
    }
    if (family.metric == Metric::kPowerLimitW) d.power_limit_w = v;
    if (family.metric == Metric::kFbTotalBytes) d.memory_total_bytes = static_cast<int64_t>(v);
    metrics_.Add(*dev, family.metric, t, v);
  }

  TimeNs Interval() const {
    // dcgm-exporter is scraped every 15 s by its Helm chart and the GPU Operator.
    return ctx_->options.sample_interval_ns > 0 ? ctx_->options.sample_interval_ns : 15 * kNsPerS;
  }

  std::optional<size_t> DeviceFromLabels(int64_t line_no) {
    int index = -1, instance = -1;
    std::string_view uuid, pci;
    for (const auto& [k, v] : labels_) {
      if (k == "gpu") {
        if (auto n = metric_text::ParseNumber(v); n && *n >= 0 && *n < 1e6) index = static_cast<int>(*n);
      } else if (k == "UUID" || k == "uuid") {
        uuid = v;
      } else if (k == "pci_bus_id") {
        pci = v;
      } else if (k == "GPU_I_ID") {
        if (auto n = metric_text::ParseNumber(v); n && *n >= 0 && *n < 1e6) instance = static_cast<int>(*n);
      }
    }
    if (index < 0 && uuid.empty()) {
      ctx_->Issue(IssueSeverity::kInfo, "unlabelled_series", [&] {
        return fmt::format("{}: a DCGM series without a gpu or UUID label; skipped", ctx_->Where(line_no));
      });
      return std::nullopt;
    }
    auto found = ctx_->Device(index, uuid, pci, instance, line_no);
    if (!found) return std::nullopt;
    MetricDevice& d = metrics_.devices[*found];
    for (const auto& [k, v] : labels_) {
      if (v.empty()) continue;
      if ((k == "modelName" || k == "model_name") && d.name.empty()) d.name = v;
      else if ((k == "Hostname" || k == "hostname") && d.hostname.empty()) d.hostname = v;
      else if ((k == "DCGM_FI_DRIVER_VERSION" || k == "DCGM_FI_SYSTEM_DRIVER_VERSION") && d.driver_version.empty())
        d.driver_version = v;
      else if (k == "GPU_I_PROFILE" && d.mig_profile.empty()) d.mig_profile = v;
      else if (IsAttributionLabel(k) && d.labels.size() < 32) d.labels.emplace(CanonicalAttributionKey(k), v);
    }
    if (instance >= 0) d.mig_mode = true;
    return found;
  }

  void Bad(int64_t line_no, std::string what) {
    ctx_->Issue(IssueSeverity::kWarning, "bad_sample", [&] {
      return fmt::format("{}: {}; line skipped", ctx_->Where(line_no), what);
    });
  }

  static constexpr size_t kMaxFamilies = 4096;
  MetricReaderContext* ctx_;
  MetricSet& metrics_;
  Family uncached_;
  std::map<std::string, Family, std::less<>> families_;
  std::map<std::string, std::string> help_;
  std::vector<std::pair<std::string_view, std::string>> labels_;
  std::vector<uint32_t> seen_;
  TimeNs scrape_time_ = 0;
  bool have_scrape_time_ = false;
  bool scrape_counted_ = false;
  int64_t samples_seen_ = 0;
  int64_t families_seen_ = 0;
};

}  // namespace

std::unique_ptr<MetricLineReader> MakeDcgmExporterReader(MetricReaderContext* ctx) {
  return std::make_unique<DcgmExporterReader>(ctx);
}

void StartDcgmExporterScrape(MetricLineReader* reader, TimeNs t) {
  static_cast<DcgmExporterReader*>(reader)->StartScrape(t);
}

}  // namespace gputriage
