#include "src/markers/marked_steps.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace gputriage {

MarkedSteps BuildMarkedSteps(const std::vector<Marker>& input) {
  std::vector<Marker> markers = input;
  // Ring order is claim order, which can differ from time order by a few ns across threads.
  std::stable_sort(markers.begin(), markers.end(), [](const Marker& a, const Marker& b) { return a.t_ns < b.t_ns; });
  MarkedSteps out;
  std::map<std::pair<uint32_t, int64_t>, TimeNs> open_steps;                  // (pid, step) → begin
  std::map<std::tuple<uint32_t, uint32_t, uint16_t>, std::vector<TimeNs>> open_phases;  // (pid, tid, phase) → begins
  struct PhaseSpan {
    uint32_t pid;
    uint16_t phase;
    Interval span;
  };
  std::vector<PhaseSpan> phases;
  std::vector<Marker> device_times;
  for (const auto& m : markers) {
    switch (m.kind) {
      case MarkerKind::kStepBegin:
        if (!open_steps.emplace(std::make_pair(m.pid, m.step), m.t_ns).second) ++out.unpaired_steps;
        break;
      case MarkerKind::kStepEnd: {
        auto it = open_steps.find(std::make_pair(m.pid, m.step));
        if (it == open_steps.end()) {
          ++out.unpaired_steps;
          break;
        }
        MarkedStep s;
        s.number = m.step;
        s.pid = m.pid;
        s.span = Interval{it->second, m.t_ns};
        s.samples = m.samples;
        s.tokens = m.tokens;
        s.flops = m.flops;
        out.steps.push_back(s);
        open_steps.erase(it);
        break;
      }
      case MarkerKind::kStepDeviceTime:
        device_times.push_back(m);
        break;
      case MarkerKind::kPhaseBegin:
        open_phases[{m.pid, m.tid, m.phase}].push_back(m.t_ns);
        break;
      case MarkerKind::kPhaseEnd: {
        auto it = open_phases.find({m.pid, m.tid, m.phase});
        if (it == open_phases.end() || it->second.empty()) {
          ++out.unpaired_phases;
          break;
        }
        phases.push_back({m.pid, m.phase, Interval{it->second.back(), m.t_ns}});
        it->second.pop_back();
        break;
      }
    }
  }
  out.unpaired_steps += static_cast<int64_t>(open_steps.size());
  for (const auto& [key, begins] : open_phases) out.unpaired_phases += static_cast<int64_t>(begins.size());
  std::sort(out.steps.begin(), out.steps.end(),
            [](const MarkedStep& a, const MarkedStep& b) { return a.span.start < b.span.start; });
  // Each phase goes to the step of its process it starts in, else the next one.
  std::map<uint32_t, std::vector<size_t>> by_pid;  // steps of each process, by start
  for (size_t i = 0; i < out.steps.size(); ++i) by_pid[out.steps[i].pid].push_back(i);
  for (const auto& p : phases) {
    auto it = by_pid.find(p.pid);
    if (it == by_pid.end() || p.phase == 0 || p.phase >= kNumMarkerPhases) {
      ++out.unassigned_phases;
      continue;
    }
    const auto& idx = it->second;
    // The last step starting at or before the phase's start...
    auto after = std::upper_bound(idx.begin(), idx.end(), p.span.start,
                                  [&](TimeNs t, size_t i) { return t < out.steps[i].span.start; });
    MarkedStep* target = nullptr;
    if (after != idx.begin()) {
      MarkedStep& s = out.steps[*(after - 1)];
      if (p.span.start <= s.span.end) target = &s;  // ... if the phase starts inside it
    }
    if (target == nullptr && after != idx.end()) target = &out.steps[*after];  // else the next step
    if (target == nullptr) {
      ++out.unassigned_phases;
      continue;
    }
    target->phase_ns[p.phase] += p.span.duration();
    // A phase before its step (the batch fetched between steps) is part of that
    // loop iteration: the step's span starts with it, so span = wait + compute.
    // It starts after the previous step ended, so steps stay in start order.
    target->span.start = std::min(target->span.start, p.span.start);
  }
  // Device times arrive whenever the job read them (often steps later): matched by process and step.
  std::map<std::pair<uint32_t, int64_t>, size_t> by_number;
  for (size_t i = 0; i < out.steps.size(); ++i) by_number[{out.steps[i].pid, out.steps[i].number}] = i;
  for (const auto& d : device_times) {
    auto it = by_number.find({d.pid, d.step});
    if (it == by_number.end() || d.samples <= 0) {
      ++out.unmatched_device_times;
      continue;
    }
    out.steps[it->second].device_ns = d.samples;
  }
  return out;
}

}  // namespace gputriage
