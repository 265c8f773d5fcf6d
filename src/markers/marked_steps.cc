#include "src/markers/marked_steps.h"

#include <algorithm>

#include "gputriage/markers.hpp"

namespace gputriage {

void StepBuilder::Add(std::vector<Marker> markers) {
  // Ring order is claim order, which can differ from time order by a few ns across threads.
  std::stable_sort(markers.begin(), markers.end(), [](const Marker& a, const Marker& b) { return a.t_ns < b.t_ns; });
  for (const auto& m : markers) {
    newest_ = std::max(newest_, m.t_ns);
    Process& p = processes_[m.pid];
    switch (m.kind) {
      case MarkerKind::kStepBegin: {
        if (p.open_by_number.count(m.step) > 0 || p.by_begin.count(m.t_ns) > 0) {
          ++counts_.unpaired_steps;
          break;
        }
        Slot slot;
        slot.step.number = m.step;
        slot.step.pid = m.pid;
        slot.step.span = Interval{m.t_ns, m.t_ns};
        // Phases that ran before it (the batch it was fed) are its own; the span starts with them.
        for (const auto& [phase_slot, span] : p.waiting) {
          slot.step.phase_ns[phase_slot] += span.duration();
          NoteSync(slot.step, phase_slot, span);
          slot.step.span.start = std::min(slot.step.span.start, span.start);
        }
        p.waiting.clear();
        p.open_by_number[m.step] = m.t_ns;
        p.by_begin.emplace(m.t_ns, slot);
        break;
      }
      case MarkerKind::kStepEnd: {
        auto it = p.open_by_number.find(m.step);
        if (it == p.open_by_number.end()) {
          ++counts_.unpaired_steps;
          break;
        }
        Slot& slot = p.by_begin.at(it->second);
        slot.open = false;
        slot.step.span.end = m.t_ns;
        slot.step.samples = m.samples;
        slot.step.tokens = m.tokens;
        slot.step.flops = m.flops;
        p.held_by_number[m.step] = it->second;
        p.open_by_number.erase(it);
        break;
      }
      case MarkerKind::kStepDeviceTime: {
        auto it = p.held_by_number.find(m.step);
        if (it == p.held_by_number.end() || m.samples <= 0) {
          ++counts_.unmatched_device_times;
          break;
        }
        p.by_begin.at(it->second).step.device_ns = m.samples;
        break;
      }
      case MarkerKind::kPhaseDeviceTime: {
        // The step may still be open (its phase's end event completed first) or held.
        auto it = p.held_by_number.find(m.step);
        const bool held = it != p.held_by_number.end();
        if (!held) it = p.open_by_number.find(m.step);
        const int slot = m.phase > 0 && m.phase <= kLastPhase ? StepPhaseSlot(m.phase) : -1;
        if ((!held && it == p.open_by_number.end()) || m.samples <= 0 || slot < 0) {
          ++counts_.unmatched_device_times;
          break;
        }
        p.by_begin.at(it->second).step.phase_device_ns[static_cast<size_t>(slot)] += m.samples;
        break;
      }
      case MarkerKind::kStepMemory:
      case MarkerKind::kStepMemoryEvents: {
        // Sampled once the step ended (or, from a job's own loop, while it runs).
        auto it = p.held_by_number.find(m.step);
        const bool held = it != p.held_by_number.end();
        if (!held) it = p.open_by_number.find(m.step);
        if (!held && it == p.open_by_number.end()) {
          ++counts_.unmatched_memory;
          break;
        }
        NoteMemory(p.by_begin.at(it->second).step, m);
        break;
      }
      case MarkerKind::kPhaseBegin:
        open_phases_[{m.pid, m.tid, m.phase}].push_back(m.t_ns);
        break;
      case MarkerKind::kPhaseEnd: {
        auto it = open_phases_.find({m.pid, m.tid, m.phase});
        if (it == open_phases_.end() || it->second.empty()) {
          ++counts_.unpaired_phases;
          break;
        }
        const Interval span{it->second.back(), m.t_ns};
        it->second.pop_back();
        if (m.phase == 0 || m.phase > kLastPhase) {
          ++counts_.unassigned_phases;
          break;
        }
        // The job's own phases are not a step's: the ledger charges them.
        const int slot = StepPhaseSlot(m.phase);
        if (slot < 0 || (m.phase == GPUTRIAGE_PHASE_CHECKPOINT && !InsideStep(p, span.start))) {
          if (counts_.run_phases.size() < kMaxRunPhases) counts_.run_phases.push_back({m.phase, m.pid, span});
          else ++counts_.run_phases_dropped;
          DropWaitingBefore(p, span.start);
          break;
        }
        Charge(p, static_cast<uint16_t>(slot), span);
        break;
      }
    }
  }
}

void StepBuilder::NoteMemory(MarkedStep& step, const Marker& m) {
  const int device = static_cast<int>(m.phase) - 1;  // -1: the host
  const int64_t current = std::max<int64_t>(0, m.samples), second = std::max<int64_t>(0, m.tokens);
  if (m.kind == MarkerKind::kStepMemoryEvents) {
    if (device < 0 || device != step.memory_device) return;  // the events of the device whose memory is kept
    step.alloc_retries = current;
    step.alloc_ooms = second;
    return;
  }
  if (device < 0) {
    step.host_rss_bytes = current;
    step.host_rss_peak_bytes = std::max(current, second);
    return;
  }
  // A process on several GPUs: the step keeps the one whose allocator holds the most.
  if (step.memory_device >= 0 && step.memory_device != device && current <= step.device_allocated_bytes) return;
  if (step.memory_device != device) step.alloc_retries = step.alloc_ooms = 0;
  step.memory_device = device;
  step.device_allocated_bytes = current;
  step.device_peak_bytes = std::max(current, second);
  const double reserved = m.flops;
  step.device_reserved_bytes = reserved > 0 && reserved < 9.0e18 ? static_cast<int64_t>(reserved) : 0;
}

void StepBuilder::NoteSync(MarkedStep& step, uint16_t slot, Interval span) {
  const bool arrives = slot == GPUTRIAGE_PHASE_FORWARD || slot == GPUTRIAGE_PHASE_COMMUNICATION;
  const bool releases = slot == GPUTRIAGE_PHASE_BACKWARD || slot == GPUTRIAGE_PHASE_COMMUNICATION;
  if (arrives && (step.sync_arrival == 0 || span.start < step.sync_arrival)) step.sync_arrival = span.start;
  if (releases && span.end > step.sync_release) step.sync_release = span.end;
}

bool StepBuilder::InsideStep(const Process& p, TimeNs start) {
  auto after = p.by_begin.upper_bound(start);
  if (after == p.by_begin.begin()) return false;
  const Slot& s = std::prev(after)->second;
  return s.open || start < s.step.span.end;  // one starting as a step ends is after it
}

void StepBuilder::Charge(Process& p, uint16_t slot, Interval span) {
  if (span.start < p.released_before) {  // its step was already handed out
    ++counts_.unassigned_phases;
    return;
  }
  // The last step begun at or before the phase's start, if the phase starts inside it...
  auto after = p.by_begin.upper_bound(span.start);
  if (after != p.by_begin.begin()) {
    Slot& s = std::prev(after)->second;
    if (s.open || span.start <= s.step.span.end) {
      s.step.phase_ns[slot] += span.duration();
      NoteSync(s.step, slot, span);
      return;
    }
  }
  // ... else the next one, if it has begun: its span then starts with the phase.
  // (Steps stay keyed by their begin marker: a later phase starting before that
  // begin still finds the previous step ended and lands here again.)
  if (after != p.by_begin.end()) {
    MarkedStep& next = after->second.step;
    next.phase_ns[slot] += span.duration();
    NoteSync(next, slot, span);
    next.span.start = std::min(next.span.start, span.start);
    return;
  }
  // ... else the step it feeds has not begun yet.
  p.waiting.emplace_back(slot, span);
}

void StepBuilder::DropWaitingBefore(Process& p, TimeNs start) {
  // A phase waiting for its step, from before a job phase (evaluation, a
  // checkpoint, compilation) began, does not feed the step after that job
  // phase: charged to it, the step's span would start before the job phase and
  // hold all of it (issue 53: each epoch's validation pass inside a training
  // step). The loop's fetch that found the loader exhausted is one such, by
  // design; anything else is counted as unassigned.
  auto from = std::stable_partition(p.waiting.begin(), p.waiting.end(),
                                    [&](const auto& waiting) { return waiting.second.start >= start; });
  for (auto it = from; it != p.waiting.end(); ++it)
    if (it->first != GPUTRIAGE_PHASE_DATA) ++counts_.unassigned_phases;
  p.waiting.erase(from, p.waiting.end());
}

void StepBuilder::Release(bool all, std::vector<MarkedStep>& out) {
  for (auto& [pid, p] : processes_) {
    for (auto it = p.by_begin.begin(); it != p.by_begin.end();) {
      Slot& slot = it->second;
      // Steps go out in start order: an open (or recent) step holds back the ones after it.
      if (!all && (slot.open || slot.step.span.end > newest_ - hold_ns_)) break;
      if (slot.open) {
        ++counts_.unpaired_steps;  // the job ended mid-step
      } else {
        out.push_back(slot.step);
        p.held_by_number.erase(slot.step.number);
      }
      p.released_before = std::max(p.released_before, slot.step.span.end);
      it = p.by_begin.erase(it);
    }
    if (all) {
      // A data phase still waiting after the process's last step is the loop's
      // last fetch, the one that found the loader exhausted (watch() and
      // zero-code mode time it like any other): no step follows it, by design.
      const bool stepped = p.released_before != INT64_MIN;
      for (const auto& [slot, span] : p.waiting)
        if (!(stepped && slot == GPUTRIAGE_PHASE_DATA && span.start >= p.released_before)) ++counts_.unassigned_phases;
      p.waiting.clear();
      p.open_by_number.clear();
    }
  }
  std::sort(out.begin(), out.end(), [](const MarkedStep& a, const MarkedStep& b) { return a.span.start < b.span.start; });
}

std::vector<MarkedStep> StepBuilder::TakeFinished() {
  std::vector<MarkedStep> out;
  Release(false, out);
  return out;
}

std::vector<RunPhase> StepBuilder::TakeRunPhases() {
  std::vector<RunPhase> out;
  out.swap(counts_.run_phases);
  return out;
}

TimeNs StepBuilder::SettledBefore(TimeNs now) const {
  TimeNs t = now;
  for (const auto& [pid, p] : processes_) {
    // A step's span can start before its begin marker (its data phase): every slot, not the first key.
    for (const auto& [begin, slot] : p.by_begin) t = std::min(t, slot.step.span.start);
    for (const auto& [phase, span] : p.waiting) t = std::min(t, span.start);
  }
  for (const auto& [key, begins] : open_phases_)
    for (TimeNs b : begins)
      if (now - b < kStaleOpenPhaseNs) t = std::min(t, b);
  return t;
}

std::vector<MarkedStep> StepBuilder::PeekEnded() const {
  std::vector<MarkedStep> out;
  for (const auto& [pid, p] : processes_)
    for (const auto& [begin, slot] : p.by_begin)
      if (!slot.open) out.push_back(slot.step);
  std::sort(out.begin(), out.end(), [](const MarkedStep& a, const MarkedStep& b) { return a.span.start < b.span.start; });
  return out;
}

MarkedSteps StepBuilder::Finish() {
  std::vector<MarkedStep> steps;
  Release(true, steps);
  for (const auto& [key, begins] : open_phases_) counts_.unpaired_phases += static_cast<int64_t>(begins.size());
  open_phases_.clear();
  MarkedSteps result = std::move(counts_);
  result.steps = std::move(steps);
  std::stable_sort(result.run_phases.begin(), result.run_phases.end(),
                   [](const RunPhase& a, const RunPhase& b) { return a.span.start < b.span.start; });
  counts_ = MarkedSteps{};
  return result;
}

MarkedSteps BuildMarkedSteps(const std::vector<Marker>& markers) {
  StepBuilder builder;
  builder.Add(markers);
  return builder.Finish();
}

}  // namespace gputriage
