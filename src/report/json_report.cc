// The JSON report (schema in docs/json-schema.md). nlohmann-json is used only here.
#include <cmath>

#include <nlohmann/json.hpp>

#include "gputriage/markers.hpp"
#include "gputriage/report.h"
#include "gputriage/version.h"
#include "src/analysis/gpu_specs.h"
#include "src/analysis/kernel_taxonomy.h"

namespace gputriage {
namespace {

using nlohmann::json;

/// NaN ("not measured") becomes null rather than an invalid JSON number.
json Num(double v) { return std::isnan(v) || std::isinf(v) ? json(nullptr) : json(v); }

/// The spec-table row a device name matched ("H100 SXM"), null when none did: the
/// peaks behind MFU, the ridge point and the compute-limit verdict come from it.
json SpecModel(const std::string& device_name) {
  const auto spec = FindGpuSpec(device_name);
  return spec ? json(spec->model) : json(nullptr);
}

/// Each marked step phase's mean per step, by name (data .. other, copy).
json PhaseTimes(const std::array<double, 9>& ms) {
  json phases = json::object();
  for (size_t slot = 1; slot < std::size(kPhaseNames); ++slot) phases[kPhaseNames[slot]] = ms[slot];
  return phases;
}

/// One marked process: who it is in the run, its phases, and its arrival at the collectives against the others.
json ProcessJson(const ProcessStepStats& p) {
  auto known = [](int v) { return v >= 0 ? json(v) : json(nullptr); };
  return {{"pid", p.pid},
          {"rank", known(p.rank)},
          {"local_rank", known(p.local_rank)},
          {"host", p.host.empty() ? json(nullptr) : json(p.host)},
          {"label", p.Label()},
          {"steps", p.steps},
          {"step_ms_p50", p.step_ms_p50},
          {"work_ms_p50", p.work_ms_p50},
          {"data_wait_ms_mean", p.data_wait_ms_mean},
          {"phases_ms_mean", PhaseTimes(p.phase_ms_mean)},
          {"untraced_ms_mean", Num(p.untraced_ms_mean)},
          {"late_ms_p50", Num(p.late_ms_p50)},
          {"waited_ms_p50", Num(p.waited_ms_p50)},
          {"last_share", Num(p.last_share)},
          {"late_from_ms", {{"start", Num(p.late_start_ms)}, {"data", Num(p.late_data_ms)}, {"host", Num(p.late_host_ms)}}}};
}

/// The phases the GPU timed, by name; null when no step carries any.
json PhaseDeviceTimes(const StepMarkerAnalysis& m) {
  if (m.phase_device_steps == 0) return nullptr;
  json phases = json::object();
  for (int slot : kDeviceTimedSlots)
    phases[kPhaseNames[slot]] = Num(m.phase_device_ms_mean[static_cast<size_t>(slot)]);
  return phases;
}

json EvidenceJson(const Evidence& e) {
  json j = {{"name", e.name}, {"value", Num(e.value)}, {"unit", e.unit}, {"source", e.source}};
  j["threshold"] = e.threshold ? Num(*e.threshold) : json(nullptr);
  j["comparison"] = e.comparison.empty() ? json(nullptr) : json(e.comparison);
  return j;
}

json FindingJson(const Finding& f) {
  json j = {{"verdict", f.verdict}, {"severity", SeverityName(f.severity)}, {"title", f.title},
            {"detail", f.detail}, {"rank", f.rank >= 0 ? json(f.rank) : json(nullptr)}, {"origin", f.origin},
            {"scope", f.scope.empty() ? json(nullptr) : json(f.scope)},
            {"recording", f.recording >= 0 ? json(f.recording) : json(nullptr)}};
  if (!f.seen_on.empty() || !f.not_seen_on.empty()) {
    j["seen_on"] = f.seen_on;
    j["not_seen_on"] = f.not_seen_on;
  }
  j["cannot_exclude"] = f.cannot_exclude;
  j["to_separate"] = f.to_separate.empty() ? json(nullptr) : json(f.to_separate);
  j["evidence"] = json::array();
  for (const auto& e : f.evidence) j["evidence"].push_back(EvidenceJson(e));
  j["recommendations"] = json::array();
  for (const auto& r : f.recommendations) j["recommendations"].push_back({{"action", r.action}, {"why", r.why}});
  if (f.gain) {
    j["expected_gain"] = {{"metric", f.gain->metric}, {"current", Num(f.gain->current)},
                          {"expected", Num(f.gain->expected)}, {"range", {Num(f.gain->best), Num(f.gain->worst)}},
                          {"unit", f.gain->unit}, {"speedup_percent", Num(f.gain->speedup_percent)},
                          {"bounded_by", f.gain->bounded_by.empty() ? json(nullptr) : json(f.gain->bounded_by)},
                          {"basis", f.gain->basis}};
  } else {
    j["expected_gain"] = nullptr;
  }
  if (!f.config_changes.empty()) {
    j["config_changes"] = json::array();
    for (const auto& c : f.config_changes)
      j["config_changes"].push_back({{"key", c.key}, {"before", c.before.empty() ? json(nullptr) : json(c.before)},
                                     {"after", c.after.empty() ? json(nullptr) : json(c.after)}});
  }
  return j;
}

json BreakdownJson(const StepBreakdown& b) {
  json j = {{"total_ms", ToMs(b.total())}};
  for (int c = 0; c < kNumStepCategories; ++c) {
    const std::string name = StepCategoryName(static_cast<StepCategory>(c));
    j[name + "_ms"] = ToMs(b.ns[c]);
    j[name + "_percent"] = b.total() > 0 ? Num(100.0 * static_cast<double>(b.ns[c]) / static_cast<double>(b.total())) : json(nullptr);
  }
  // communication_ms as torch-tb-profiler counts it (collective kernels and the host's
  // nccl:* spans), and its device part: the device's own time adds up without the host's.
  j["device_communication_ms"] = ToMs(b.device_communication_ns());
  return j;
}

json IdleJson(const IdleBreakdown& idle) {
  json j = {{"total_ms", ToMs(idle.total())}, {"gaps", idle.gaps}};
  for (int c = 0; c < kNumIdleCauses; ++c) j[std::string(IdleCauseName(static_cast<IdleCause>(c))) + "_ms"] = ToMs(idle.ns[c]);
  return j;
}

/// Of the idle time's host_wait, the launching thread inside OS calls (an OS
/// runtime trace) and where it ran otherwise (CPU samples); null where the
/// source has neither, each part null where it lacks that one.
json HostOsWaitsJson(const HostOsWaits& w) {
  if (!w.traced && !w.sampled) return nullptr;
  json j = {{"thread", w.thread}, {"in_os_calls_ms", nullptr}, {"calls", nullptr}, {"running_samples", nullptr},
            {"running_modules", nullptr}};
  if (w.traced) {
    j["in_os_calls_ms"] = ToMs(w.in_os_calls_ns);
    j["calls"] = json::array();
    for (const auto& [name, ns] : w.calls) j["calls"].push_back({{"name", name}, {"ms", ToMs(ns)}});
  }
  if (w.sampled) {
    j["running_samples"] = w.running_samples;
    j["running_modules"] = json::array();
    for (const auto& [module, n] : w.running_modules) j["running_modules"].push_back({{"module", module}, {"samples", n}});
  }
  return j;
}

json DistributionJson(const MetricDistribution& m) {
  return {{"samples", m.samples}, {"mean", Num(m.mean)}, {"p5", Num(m.p5)}, {"p50", Num(m.p50)},
          {"p95", Num(m.p95)}, {"min", Num(m.min)}, {"max", Num(m.max)}};
}

json MetricDeviceJson(const DeviceMetricAnalysis& d) {
  json j = {{"label", d.label}, {"name", d.name}, {"uuid", d.uuid.empty() ? json(nullptr) : json(d.uuid)},
            {"hostname", d.hostname.empty() ? json(nullptr) : json(d.hostname)}, {"mig_instance", d.mig_instance},
            {"mig_mode", d.mig_mode}, {"labels", d.labels},
            {"job_use", d.job_use.empty() ? json(nullptr) : json(d.job_use)}, {"other_processes", d.other_processes},
            {"first_ns", d.first_ns}, {"last_ns", d.last_ns},
            {"median_interval_s", static_cast<double>(d.median_interval_ns) / 1e9}, {"hours", d.hours},
            {"span_hours", d.span_hours}, {"sampling_gaps", d.sampling_gaps},
            {"timestamps_synthetic", d.timestamps_synthetic},
            {"busy_metric", d.busy_metric.empty() ? json(nullptr) : json(d.busy_metric)},
            {"busy_mean_percent", Num(d.busy_mean_percent)}, {"near_zero_share", Num(d.near_zero_share)},
            {"fed_mean_percent", Num(d.fed_mean_percent)},
            {"near_full_share", Num(d.near_full_share)},
            {"near_zero_without_job_share", d.near_zero_without_job_share}};
  j["rhythm"] = {{"blocks", d.rhythm.blocks}, {"period_s", d.rhythm.period_samples > 0 ? json(static_cast<double>(d.rhythm.period_ns) / 1e9) : json(nullptr)},
                 {"strength", Num(d.rhythm.strength)}, {"sawtooth_depth_percent", Num(d.rhythm.swing_p50)}};
  {
    json listed = json::array();
    for (const auto& [begin, end] : d.idle_phases.listed) listed.push_back({{"start_ns", begin}, {"end_ns", end}});
    j["idle_phases"] = {{"count", d.idle_phases.count},
                        {"total_s", static_cast<double>(d.idle_phases.total_ns) / 1e9},
                        {"longest_s", static_cast<double>(d.idle_phases.longest_ns) / 1e9},
                        {"share", Num(d.idle_phase_share)},
                        {"listed", listed}};
  }
  j["metrics"] = json::object();
  for (int m = 0; m < kNumMetrics; ++m)
    if (d.metrics[m].samples > 0) {
      json mj = DistributionJson(d.metrics[m]);
      mj["unit"] = MetricUnit(static_cast<Metric>(m));
      j["metrics"][MetricName(static_cast<Metric>(m))] = mj;
    }
  j["power"] = {{"limit_w", d.power_limit_w > 0 ? json(d.power_limit_w) : json(nullptr)},
                {"limit_source", d.power_limit_source.empty() ? json(nullptr) : json(d.power_limit_source)},
                {"mean_percent_of_limit", Num(d.power_mean_percent_of_limit)}};
  j["clocks"] = {{"max_sm_mhz", d.max_sm_clock_mhz > 0 ? json(d.max_sm_clock_mhz) : json(nullptr)},
                 {"sm_mean_percent_of_max", Num(d.sm_clock_mean_percent_of_max)},
                 {"event_samples", d.reason_samples}, {"limiting_event_share", Num(d.limiting_reason_share)},
                 {"events_seen", d.active_reasons},
                 {"max_sm_source", d.max_sm_clock_source.empty() ? json(nullptr) : json(d.max_sm_clock_source)}};
  j["loaded"] = {{"share", Num(d.loaded_share)}, {"clock_samples", d.loaded_clock_samples},
                 {"power_mean_w", Num(d.loaded_power_mean_w)}, {"power_max_w", Num(d.loaded_power_max_w)},
                 {"power_mean_percent_of_limit", Num(d.loaded_power_percent_of_limit)},
                 {"sm_clock_mean_mhz", Num(d.loaded_sm_clock_mean_mhz)}, {"sm_clock_min_mhz", Num(d.loaded_sm_clock_min_mhz)},
                 {"sm_clock_max_mhz", Num(d.loaded_sm_clock_max_mhz)},
                 {"power_cv", Num(d.loaded_power_cv)}, {"sm_clock_cv", Num(d.loaded_sm_clock_cv)},
                 {"sm_clock_mean_percent_of_max", Num(d.loaded_sm_clock_percent_of_max)},
                 {"temp_mean_c", Num(d.loaded_temp_mean_c)}};
  j["memory_used_max_percent"] = Num(d.memory_used_max_percent);
  j["pcie_rx_p95_over_mean"] = Num(d.pcie_rx_p95_over_mean);
  j["busy_timeline"] = json::array();
  for (const auto& p : d.busy_timeline)
    j["busy_timeline"].push_back({{"start_ns", p.start}, {"mean", p.mean}, {"min", p.min}, {"max", p.max}, {"samples", p.count}});
  return j;
}

json CostJson(const CostReport& c) {
  json j = {{"available", c.available}, {"price_basis", c.price_basis.empty() ? json(nullptr) : json(c.price_basis)},
            {"gpu_hours", c.gpu_hours}, {"cost_usd", c.available ? json(c.cost_usd) : json(nullptr)},
            {"idle_cost_by_util_usd", Num(c.idle_cost_by_util_usd)}, {"idle_cost_by_sm_usd", Num(c.idle_cost_by_sm_usd)},
            {"monthly_spend_usd", c.monthly_spend_usd ? json(*c.monthly_spend_usd) : json(nullptr)},
            {"monthly_idle_by_util_usd", Num(c.monthly_idle_by_util_usd)},
            {"monthly_idle_by_sm_usd", Num(c.monthly_idle_by_sm_usd)}, {"util_mean_percent", Num(c.util_mean_percent)},
            {"sm_active_mean_percent", Num(c.sm_active_mean_percent)}, {"notes", c.notes}};
  j["devices"] = json::array();
  for (const auto& d : c.devices)
    j["devices"].push_back({{"label", d.label}, {"name", d.name}, {"hours", d.hours}, {"board_share", d.board_share},
                            {"price_per_hour", d.price_per_hour > 0 ? json(d.price_per_hour) : json(nullptr)},
                            {"price_source", d.price_source.empty() ? json(nullptr) : json(d.price_source)},
                            {"cost_usd", d.price_per_hour > 0 ? json(d.cost_usd) : json(nullptr)},
                            {"util_percent", Num(d.util_percent)}, {"idle_cost_by_util_usd", Num(d.idle_cost_by_util_usd)},
                            {"sm_active_percent", Num(d.sm_active_percent)}, {"idle_cost_by_sm_usd", Num(d.idle_cost_by_sm_usd)}});
  j["what_if"] = json::array();
  for (const auto& w : c.what_if)
    j["what_if"].push_back({{"from_percent", w.from_percent}, {"to_percent", w.to_percent},
                            {"more_compute_percent", w.more_compute_percent}, {"spend_saved_percent", w.spend_saved_percent},
                            {"monthly_saving_usd", w.monthly_saving_usd ? json(*w.monthly_saving_usd) : json(nullptr)},
                            {"text", WhatIfLine(w)}});
  return j;
}

json LedgerJson(const RunLedger& l) {
  if (!l.valid) return nullptr;
  json buckets = json::array();
  for (const auto& b : l.buckets)
    buckets.push_back({{"name", b.name}, {"label", b.Label()}, {"group", b.group}, {"known", b.known},
                       {"hours", b.known ? json(b.hours) : json(nullptr)}, {"share", b.known ? Num(b.share) : json(nullptr)},
                       {"dollars", b.known ? Num(b.dollars) : json(nullptr)}, {"count", b.count}, {"source", b.source}});
  return {{"unit", l.unit},        {"gpus", l.gpus},
          {"gpus_source", l.gpus_source}, {"wall_hours", l.wall_hours},
          {"span_source", l.span_source}, {"total", l.total},
          {"goodput", Num(l.goodput)},    {"price_per_gpu_hour", Num(l.price_per_gpu_hour)},
          {"price_source", l.price_source.empty() ? json(nullptr) : json(l.price_source)},
          {"buckets", buckets},           {"notes", l.notes}};
}

/// One device's memory over a trace: its peaks and its curve as columns.
json DeviceMemoryJson(const DeviceMemoryUse& m) {
  json t = json::array(), allocated = json::array(), reserved = json::array();
  const TimeNs t0 = m.curve.empty() ? 0 : m.curve.front().t;
  for (const auto& p : m.curve) {
    t.push_back(std::round(static_cast<double>(p.t - t0) / 1e3) / 1e3);  // ms after t0, to the µs
    allocated.push_back(p.allocated);
    reserved.push_back(p.reserved >= 0 ? json(p.reserved) : json(nullptr));
  }
  return {{"device", m.host ? std::string("CPU") : "GPU" + std::to_string(m.device)},
          {"device_id", m.host ? json(nullptr) : json(m.device)},
          {"peak_allocated_bytes", m.peak_allocated},
          {"peak_reserved_bytes", m.peak_reserved >= 0 ? json(m.peak_reserved) : json(nullptr)},
          {"peak_at_ns", m.peak_at}, {"events", m.events}, {"relative", m.relative}, {"events_thinned", m.thinned},
          {"curve", {{"t0_ns", t0}, {"t_ms", t}, {"allocated_bytes", allocated}, {"reserved_bytes", reserved}}}};
}

/// A profile_memory trace's memory: the GPU's peaks against its size, and every device's curve.
json TraceMemoryJson(const TraceMemory& m) {
  if (!m.available && m.devices.empty()) return nullptr;
  json devices = json::array();
  for (const auto& d : m.devices) devices.push_back(DeviceMemoryJson(d));
  return {{"peak_allocated_gib", m.available ? Num(m.peak_allocated_gib) : json(nullptr)},
          {"peak_reserved_gib", m.available ? Num(m.peak_reserved_gib) : json(nullptr)},
          {"total_gib", m.available && m.total_gib > 0 ? Num(m.total_gib) : json(nullptr)},  // 0: the GPU's size unknown
          {"peak_reserved_percent", Num(m.peak_reserved_percent)},
          {"devices", devices}};
}

/// An allocator snapshot's state per device (null for other sources).
json AllocatorStatesJson(const std::vector<AllocatorState>& states) {
  if (states.empty()) return nullptr;
  json out = json::array();
  for (const auto& s : states) {
    json blocks = json::object(), ooms = json::array();
    for (const auto& [state, counted] : s.blocks) blocks[state] = {{"count", counted.first}, {"bytes", counted.second}};
    for (const auto& o : s.ooms)
      ooms.push_back({{"t_ns", o.t}, {"requested_bytes", o.requested_bytes},
                      {"device_free_bytes", o.device_free_bytes >= 0 ? json(o.device_free_bytes) : json(nullptr)},
                      {"where", o.where}});
    out.push_back({{"device", s.device}, {"segments", s.segments}, {"reserved_bytes", s.reserved_bytes},
                   {"allocated_bytes", s.allocated_bytes}, {"active_bytes", s.active_bytes},
                   {"requested_bytes", s.requested_bytes}, {"blocks", blocks}, {"history", s.actions}, {"ooms", ooms}});
  }
  return out;
}

json TrendJson(const MemoryTrend& t) {
  if (t.points == 0 && t.why_not.empty()) return nullptr;
  return {{"points", t.points},
          {"first_step", t.first_step},
          {"last_step", t.last_step},
          {"first_quarter_bytes", Num(t.first_bytes)},
          {"last_quarter_bytes", Num(t.last_bytes)},
          {"bytes_per_step", Num(t.bytes_per_step)},
          {"bytes_per_step_range", {Num(t.bytes_per_step_low), Num(t.bytes_per_step_high)}},
          {"bytes_per_hour", Num(t.bytes_per_hour)},
          {"creeping", t.creeping},
          {"why_not", t.why_not.empty() ? json(nullptr) : json(t.why_not)}};
}

/// Memory sampled at step ends (null where the job's steps carried none).
json StepMemoryJson(const StepMemoryAnalysis& m) {
  if (!m.sampled && !m.oom.known) return nullptr;
  const auto bytes = [](int64_t v) { return v >= 0 ? json(v) : json(nullptr); };
  const auto text = [](const std::string& v) { return v.empty() ? json(nullptr) : json(v); };
  const OutOfMemoryError& e = m.oom;
  const json oom = !e.known ? json(nullptr)
                            : json{{"device", e.device},
                                   {"requested_bytes", bytes(e.requested_bytes)},
                                   {"total_bytes", bytes(e.total_bytes)},
                                   {"free_bytes", bytes(e.free_bytes)},
                                   {"allocated_bytes", bytes(e.allocated_bytes)},
                                   {"reserved_unallocated_bytes", bytes(e.reserved_unallocated_bytes)},
                                   {"step", bytes(e.step)},
                                   {"where", text(e.where)},
                                   {"message", text(e.message)},
                                   {"snapshot", text(e.snapshot)},
                                   {"host_rss_bytes", bytes(e.host_rss_bytes)},
                                   {"host_address_space_bytes", bytes(e.host_vm_bytes)},
                                   {"host_rss_peak_bytes", bytes(e.host_rss_peak_bytes)},
                                   {"host_address_space_peak_bytes", bytes(e.host_vm_peak_bytes)},
                                   {"address_space_limit_bytes", bytes(e.address_space_limit_bytes)},
                                   {"host_limit_bytes", bytes(e.host_limit_bytes)},
                                   {"host_limit_source", text(e.host_limit_source)}};
  const auto known = [](int64_t v) { return v > 0 ? json(v) : json(nullptr); };
  json processes = json::array();
  for (const auto& p : m.processes)
    processes.push_back({{"pid", p.pid},
                         {"rank", p.rank >= 0 ? json(p.rank) : json(nullptr)},
                         {"sampled_steps", p.sampled_steps},
                         {"samples_per_step", Num(p.samples_per_step)},
                         {"host_at_step_end_median_bytes", Num(p.host_end_median_bytes > 0 ? p.host_end_median_bytes : NAN)},
                         {"gpu_at_step_end_median_bytes", Num(p.device >= 0 ? p.gpu_end_median_bytes : NAN)},
                         {"host", {{"rss_peak_bytes", known(p.host_rss_peak_bytes)},
                                   {"rss_last_bytes", known(p.host_rss_last_bytes)},
                                   {"trend", TrendJson(p.host)}}},
                         {"gpu", p.device < 0 ? json(nullptr)
                                              : json{{"device", p.device},
                                                     {"allocated_peak_bytes", p.device_peak_bytes},
                                                     {"reserved_max_bytes", p.device_reserved_max_bytes},
                                                     {"allocated_last_bytes", p.device_allocated_last_bytes},
                                                     {"alloc_retries", p.alloc_retries},
                                                     {"ooms", p.alloc_ooms},
                                                     {"trend", TrendJson(p.gpu)}}}});
  return {{"processes", processes},
          {"out_of_memory", oom},
          {"static", {{"device", m.static_device.empty() ? json(nullptr) : json(m.static_device)},
                      {"parameters_bytes", bytes(m.parameters_bytes)},
                      {"gradients_bytes", bytes(m.gradients_bytes)},
                      {"optimizer_state_bytes", bytes(m.optimizer_state_bytes)}}},
          {"device_total_bytes", known(m.device_total_bytes)},
          {"host_total_bytes", known(m.host_total_bytes)},
          {"host_limit_source", m.host_limit_source.empty() ? json(nullptr) : json(m.host_limit_source)}};
}

json RecordingJson(const Recording& rec, const RecordingAnalysis& a, int max_kernels) {
  json j;
  j["source"] = a.source;
  j["format"] = rec.format;
  j["rank"] = a.rank >= 0 ? json(a.rank) : json(nullptr);
  j["world_size"] = rec.world_size >= 0 ? json(rec.world_size) : json(nullptr);
  // What the run was, as recorded: the command, tags, commit, the job's own
  // configuration (dataloader.*, optimizer.*, autocast.*, ...), a trace's metadata.
  j["settings"] = rec.metadata;
  j["device"] = {{"id", a.device.id}, {"name", a.device.name}, {"vendor", VendorName(a.device.vendor)},
                 {"compute_capability", a.device.compute_major >= 0
                                            ? json(std::to_string(a.device.compute_major) + "." + std::to_string(a.device.compute_minor))
                                            : json(nullptr)},
                 {"num_sms", a.device.num_sms}, {"total_memory_bytes", a.device.total_memory_bytes},
                 {"spec", SpecModel(a.device.name)}};
  j["import"] = {{"bytes", rec.stats.bytes_read}, {"events", rec.stats.events_seen}, {"events_used", rec.stats.events_used},
                 {"python_function_events", rec.stats.python_function_events}, {"truncated", rec.stats.truncated},
                 {"truncation_note", rec.stats.truncated ? json(rec.stats.truncation_note) : json(nullptr)}};
  j["import"]["issues"] = json::array();
  for (const auto& i : rec.stats.issues)
    j["import"]["issues"].push_back({{"kind", i.kind}, {"count", i.count}, {"first", i.message},
                                     {"severity", i.severity == IssueSeverity::kInfo ? "info" : i.severity == IssueSeverity::kWarning ? "warning" : "error"}});
  j["steps_from_markers"] = a.steps_from_markers;
  j["avg_step_ms"] = ToMs(a.avg_step_ns);
  j["step_breakdown"] = {{"average", BreakdownJson(a.average)}, {"warmup_steps", a.warmup_steps}, {"steps", json::array()}};
  for (const auto& s : a.steps) {
    json sj = BreakdownJson(s);
    sj["step"] = s.number >= 0 ? json(s.number) : json(nullptr);
    sj["start_ns"] = s.window.start;
    j["step_breakdown"]["steps"].push_back(sj);
  }
  j["gpus"] = json::array();
  for (const auto& g : a.gpus)
    j["gpus"].push_back({{"device", g.device}, {"busy_percent", Num(g.busy_percent)},
                         {"sm_efficiency_percent", Num(g.sm_efficiency_percent)},
                         {"achieved_occupancy_percent", Num(g.achieved_occupancy_percent)},
                         {"window_ms", ToMs(g.window_ns)}, {"busy_ms", ToMs(g.busy_ns)}});
  j["idle"] = IdleJson(a.device_idle);
  j["idle"]["host_wait_os_calls"] = HostOsWaitsJson(a.host_os_waits);
  j["idle"]["streams"] = json::array();
  for (const auto& s : a.streams) {
    json sj = IdleJson(s.idle);
    sj["stream"] = s.stream;
    sj["busy_ms"] = ToMs(s.busy_ns);
    j["idle"]["streams"].push_back(sj);
  }
  json precision = {{"matrix_ms", ToMs(a.precision.matrix_total_ns)}, {"kernel_ms", ToMs(a.precision.kernel_total_ns)},
                    {"matrix_percent_of_kernel_time", Num(a.precision.matrix_percent_of_kernels)},
                    {"tensor_core_percent_of_matrix_time", Num(a.precision.tensor_core_percent_of_matrix)}};
  precision["matrix_ms_by_precision"] = json::object();
  for (int p = 0; p < kNumPrecisions; ++p)
    if (a.precision.matrix_ns[p] > 0)
      precision["matrix_ms_by_precision"][PrecisionName(static_cast<Precision>(p))] = ToMs(a.precision.matrix_ns[p]);
  precision["memory_bound_ms"] = ToMs(a.precision.memory_bound_ns);
  precision["memory_bound_percent_of_kernel_time"] = Num(a.precision.memory_bound_percent_of_kernels);
  j["precision"] = precision;
  j["attention"] = {{"backend", a.attention.backend}, {"fused_ms", ToMs(a.attention.fused_ns)},
                    {"softmax_ms", ToMs(a.attention.softmax_ns)}, {"softmax_kernels", a.attention.softmax_kernels},
                    {"batched_gemm_ms", ToMs(a.attention.batched_gemm_ns)}};
  j["launch"] = {{"kernels", a.launch.kernels}, {"kernels_per_step", Num(a.launch.kernels_per_step)},
                 {"median_kernel_us", Num(a.launch.median_kernel_us)}, {"short_kernel_percent", Num(a.launch.short_kernel_percent)},
                 {"mean_launch_interval_us", Num(a.launch.mean_launch_interval_us)},
                 {"median_launch_delay_us", Num(a.launch.median_launch_delay_us)}, {"graph_launches", a.launch.graph_launches},
                 {"graph_kernels", a.launch.graph_kernels}, {"host_launches_per_step", Num(a.launch.host_launches_per_step)},
                 {"kernel_records", a.kernel_records},
                 {"kernel_launch_calls", a.kernel_launch_calls >= 0 ? json(a.kernel_launch_calls) : json(nullptr)},
                 {"captured_kernel_launches", a.captured_kernel_launches},
                 {"dropped_kernel_records", a.dropped_kernel_records}};
  j["communication"] = {{"kernel_ms", ToMs(a.comm.kernel_ns)}, {"wall_ms", ToMs(a.comm.union_ns)},
                        {"overlapped_ms", ToMs(a.comm.overlapped_ns)}, {"exposed_ms", ToMs(a.comm.exposed_ns)},
                        {"percent_of_kernel_time", Num(a.comm.share_of_kernel_time_percent)},
                        {"overlap_percent", Num(a.comm.overlap_percent)}};
  {
    auto prediction = [](const StepPrediction& p) -> json {
      if (!p.available) return nullptr;
      return {{"expected_ms", Num(p.expected_ms)}, {"range_ms", {Num(p.best_ms), Num(p.worst_ms)}},
              {"gpu_busy_ms", Num(p.gpu_busy_ms)}, {"bounded_by", p.bounded_by}, {"basis", p.basis}};
    };
    j["what_if"] = {{"replay_identity_ms", Num(a.what_if.identity_ms)},
                    {"no_data_wait", prediction(a.what_if.no_data_wait)},
                    {"faster_matrix", prediction(a.what_if.faster_matrix)},
                    {"fused_attention", prediction(a.what_if.fused_attention)},
                    {"fused_memory", prediction(a.what_if.fused_memory)},
                    {"aligned_shapes", prediction(a.what_if.aligned_shapes)}};
  }
  {
    json shapes = {{"available", a.shapes.available}, {"checked_matrix_ms", ToMs(a.shapes.checked_ns)},
                   {"misaligned_matrix_ms", ToMs(a.shapes.misaligned_ns)},
                   {"misaligned_percent_of_matrix_time", Num(a.shapes.misaligned_percent_of_matrix)}};
    shapes["top"] = json::array();
    for (const auto& m : a.shapes.top)
      shapes["top"].push_back({{"op", m.name}, {"dtype", m.dtype}, {"input_dims", m.shapes}, {"off_tile", m.dims},
                               {"calls", m.calls}, {"kernel_ms", ToMs(m.kernel_ns)}});
    j["shapes"] = shapes;
    const Roofline& r = a.roofline;
    json roofline = {{"available", r.available}};
    if (!r.unavailable_reason.empty()) roofline["unavailable_reason"] = r.unavailable_reason;
    if (r.available) {
      roofline["gpu_model"] = r.gpu_model;
      roofline["peak_bandwidth_gbs"] = Num(r.peak_bandwidth_gbs);
      roofline["checked_ms"] = ToMs(r.checked_ns);
      roofline["memory_bound_ms"] = ToMs(r.memory_bound_ns);
      roofline["memory_bound_percent_of_checked"] = Num(r.memory_bound_percent_of_checked);
      roofline["memory_bound_bandwidth_percent_of_peak"] = Num(r.memory_bound_bandwidth_percent);
      roofline["compute_bound_percent_of_peak"] = Num(r.compute_bound_percent_of_peak);
      roofline["intensity_p50_flops_per_byte"] = Num(r.intensity_p50);
      roofline["ridge_p50_flops_per_byte"] = Num(r.ridge_p50);
      roofline["top"] = json::array();
      for (const auto& o : r.top)
        roofline["top"].push_back({{"op", o.name}, {"dtype", o.dtype}, {"input_dims", o.shapes}, {"precision", o.precision},
                                   {"calls", o.calls}, {"kernel_ms", ToMs(o.kernel_ns)}, {"flops", Num(o.flops)},
                                   {"bytes", Num(o.bytes)}, {"intensity_flops_per_byte", Num(o.intensity)},
                                   {"ridge_flops_per_byte", Num(o.ridge)}, {"achieved_tflops", Num(o.achieved_tflops)},
                                   {"achieved_bandwidth_gbs", Num(o.achieved_bandwidth_gbs)},
                                   {"bound", o.memory_bound ? "memory" : "compute"}});
    }
    j["roofline"] = roofline;
    j["serving"] = {{"steps", a.serving.steps}, {"tokens", a.serving.tokens},
                    {"tokens_per_step_median", Num(a.serving.tokens_per_step_median)},
                    {"decode_only_steps", a.serving.decode_only_steps}};
  }
  j["memory"] = TraceMemoryJson(a.memory);
  j["allocator_snapshot"] = AllocatorStatesJson(rec.allocator_states);
  j["step_memory"] = StepMemoryJson(a.step_memory);
  j["throughput"] = {{"available", a.throughput.available}, {"flops_per_step", Num(a.throughput.flops_per_step)},
                     {"achieved_tflops", Num(a.throughput.achieved_tflops)}, {"mfu_percent", Num(a.throughput.mfu_percent)},
                     {"peak_tflops", Num(a.throughput.peak_tflops)}, {"peak_basis", a.throughput.peak_basis}};
  j["kernels"] = {{"distinct_names", a.kernel_names}, {"top", json::array()}};
  for (size_t i = 0; i < a.top_kernels.size() && (max_kernels < 0 || i < static_cast<size_t>(max_kernels)); ++i) {
    const auto& k = a.top_kernels[i];
    j["kernels"]["top"].push_back({{"name", k.name}, {"class", k.kernel_class}, {"precision", k.precision.empty() ? json(nullptr) : json(k.precision)},
                                   {"tensor_cores", k.tensor_cores}, {"count", k.count}, {"total_ms", ToMs(k.total_ns)},
                                   {"mean_us", k.count ? static_cast<double>(k.total_ns) / static_cast<double>(k.count) / 1000.0 : 0.0},
                                   {"mean_blocks_per_sm", Num(k.mean_blocks_per_sm)}, {"mean_occupancy_percent", Num(k.mean_occupancy_percent)}});
  }
  j["limitations"] = a.limitations;
  j["phase"] = a.phase.empty() ? json(nullptr) : json(a.phase);
  j["metric_rows"] = rec.metrics.rows;
  j["metric_samples"] = rec.metrics.samples;
  j["clock_note"] = rec.metrics.clock_note.empty() ? json(nullptr) : json(rec.metrics.clock_note);
  j["metric_devices"] = json::array();
  for (const auto& d : a.metric_devices) j["metric_devices"].push_back(MetricDeviceJson(d));
  j["ledger"] = LedgerJson(a.ledger);
  if (const HostUsageAnalysis& h = a.host; h.known)
    j["host"] = {{"seconds", h.seconds},
                 {"job_cpus", h.job_cpus},
                 {"machine_cpus", h.machine_cpus},
                 {"job_cpu_cores_mean", Num(h.job_cores_mean)},
                 {"main_cpu_cores_mean", Num(h.main_cores_mean)},
                 {"other_cpu_cores_mean", Num(h.other_cores_mean)},
                 {"job_processes_max", h.job_processes_max},
                 {"machine_busy_percent_mean", Num(h.machine_busy_percent_mean)},
                 {"saturated_percent_of_time", Num(h.saturated_percent_of_time)},
                 {"job_rss_peak_mib", Num(h.job_rss_peak_mib)},
                 {"job_cpu_seconds", Num(h.job_cpu_seconds)}};
  else
    j["host"] = nullptr;
  const StepMarkerAnalysis& m = a.marked;
  if (m.steps == 0) {
    j["step_markers"] = nullptr;
  } else {
    json processes = json::array();
    for (const auto& p : m.by_process) processes.push_back(ProcessJson(p));
    j["step_markers"] = {{"steps", m.steps},
                         {"warmup_steps", m.warmup_steps},
                         {"step_boundary", m.step_boundary.empty() ? json(nullptr) : json(m.step_boundary)},
                         {"processes", m.processes},
                         {"step_ms_mean", m.step_ms_mean},
                         {"step_ms_p50", m.step_ms_p50},
                         {"step_ms_p95", m.step_ms_p95},
                         {"step_ms_cv", m.step_ms_cv},
                         {"outlier_steps", m.outlier_steps},
                         {"outlier_time_percent", m.outlier_time_percent},
                         {"outlier_phase", m.outlier_phase.empty() ? json(nullptr) : json(m.outlier_phase)},
                         {"outlier_phase_excess_ms", m.outlier_phase.empty() ? json(nullptr) : json(m.outlier_phase_ms)},
                         {"phases_known", m.phases_known},
                         {"phases_ms_mean", PhaseTimes(m.phase_ms_mean)},
                         {"phases_traced", m.phases_traced},
                         {"phase_timing", m.phase_device_steps > 0 ? "host and device" : "host"},
                         {"phase_device_steps", m.phase_device_steps},
                         {"phases_device_ms_mean", PhaseDeviceTimes(m)},
                         {"untraced_ms_mean", Num(m.untraced_ms_mean)},
                         {"untraced_ms_p50", Num(m.untraced_ms_p50)},
                         {"untraced_percent_of_step", Num(m.untraced_percent_of_step)},
                         {"data_wait_ms_mean", m.data_wait_ms_mean},
                         {"compute_ms_mean", m.compute_ms_mean},
                         {"data_wait_percent_of_compute", m.data_wait_percent_of_compute},
                         {"data_wait_host_ms_mean", m.data_wait_host_ms_mean},
                         {"device_steps", m.device_steps},
                         {"device_ms_mean", Num(m.device_ms_mean)},
                         {"gpu_idle_ms_mean", Num(m.gpu_idle_ms_mean)},
                         {"samples_per_s", Num(m.samples_per_s)},
                         {"tokens_per_s", Num(m.tokens_per_s)},
                         {"flops_per_step", Num(m.flops_per_step)},
                         {"achieved_tflops", Num(m.achieved_tflops)},
                         {"gpu_model", m.gpu_model.empty() ? json(nullptr) : json(m.gpu_model)},
                         {"peak_tflops", Num(m.peak_tflops)},
                         {"mfu_percent", Num(m.mfu_percent)},
                         {"by_process", processes},
                         {"optimizer_steps", m.optimizer_steps},  // fewer than steps: the steps are micro-batches
                         {"rank_sync", {{"matched_steps", m.sync.matched_steps},
                                        {"arrival_spread_ms_p50", Num(m.sync.arrival_spread_ms_p50)},
                                        {"release_spread_ms_p50", Num(m.sync.release_spread_ms_p50)},
                                        {"synchronous", m.sync.synchronous}}}};
  }
  return j;
}

}  // namespace

std::string RenderJson(const Run& run, const Diagnosis& d, int indent) {
  JsonOptions options;
  options.indent = indent;
  return RenderJson(run, d, options);
}

std::string RenderJson(const Run& run, const Diagnosis& d, const JsonOptions& options) {
  const int indent = options.indent;
  json j;
  j["schema"] = "gputriage.report";
  j["schema_version"] = kReportSchemaVersion;
  j["tool"] = {{"name", "gputriage"}, {"version", kGputriageVersion}};
  const Summary& s = d.summary;
  j["summary"] = {{"gpu_busy_percent", Num(s.gpu_busy_percent)}, {"data_wait_percent", Num(s.data_wait_percent)},
                  {"avg_step_ms", Num(s.avg_step_ms)}, {"steps", s.steps},
                  {"sm_efficiency_percent", Num(s.sm_efficiency_percent)},
                  {"achieved_occupancy_percent", Num(s.achieved_occupancy_percent)},
                  {"tensor_core_percent_of_matrix_time", Num(s.tensor_core_percent_of_matrix)},
                  {"exposed_communication_percent", Num(s.exposed_communication_percent)},
                  {"device", s.device}, {"recordings", s.recordings},
                  {"gpu_busy_source", s.gpu_busy_source}, {"devices", s.devices}, {"gpu_hours", s.gpu_hours},
                  {"gpu_util_mean_percent", Num(s.gpu_util_mean_percent)},
                  {"idle_cost_usd", s.idle_cost_usd ? json(*s.idle_cost_usd) : json(nullptr)},
                  {"idle_cost_usd_per_month", s.idle_cost_usd_per_month ? json(*s.idle_cost_usd_per_month) : json(nullptr)},
                  {"workload", s.workload}};
  j["cost"] = CostJson(d.cost);
  j["notes"] = d.notes;
  j["collective_skew"] = json::array();
  for (const auto& k : d.collective_skew) {
    json ranks = json::array();
    for (const auto& r : k.by_rank)
      ranks.push_back({{"rank", r.rank}, {"late", r.late}, {"late_share", Num(r.late_share)},
                       {"lateness_ms_mean", Num(r.lateness_ms_mean)}, {"wait_ms_per_step", Num(r.wait_ms_per_step)},
                       {"transfer_ms_per_step", Num(r.transfer_ms_per_step)},
                       {"excess_before_late_ms", {{"compute", Num(r.excess_compute_ms)},
                                                  {"data_wait", Num(r.excess_data_wait_ms)},
                                                  {"host", Num(r.excess_host_ms)}}}});
    j["collective_skew"].push_back(
        {{"available", k.available}, {"unavailable_reason", k.unavailable_reason}, {"events", k.events},
         {"ranks", k.ranks}, {"collectives", k.collectives}, {"with_late_rank", k.with_late_rank},
         {"end_spread_us_p50", Num(k.end_spread_us_p50)}, {"start_spread_us_p50", Num(k.start_spread_us_p50)},
         {"step_ms", Num(k.step_ms)}, {"wait_ms_per_step", Num(k.wait_ms_per_step)},
         {"transfer_ms_per_step", Num(k.transfer_ms_per_step)},
         {"straggler_rank", k.straggler_rank < 0 ? json(nullptr) : json(k.straggler_rank)},
         {"straggler_late_share", Num(k.straggler_late_share)}, {"straggler_step_share", Num(k.straggler_step_share)},
         {"straggler_chance", Num(k.straggler_chance)},
         {"persistent", k.persistent}, {"cause", k.cause}, {"gap_ms_per_step", Num(k.saving_ms_per_step)},
         {"by_rank", ranks}});
  }
  j["findings"] = json::array();
  for (const auto& f : d.findings) j["findings"].push_back(FindingJson(f));
  j["recordings"] = json::array();
  for (size_t i = 0; i < d.recordings.size() && i < run.recordings.size(); ++i)
    j["recordings"].push_back(RecordingJson(run.recordings[i], d.recordings[i], options.max_kernels));
  // Invalid UTF-8 in kernel names must not abort the dump.
  return j.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace gputriage
