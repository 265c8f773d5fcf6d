// gputriage._markers: the Python binding of the step markers
// (include/gputriage/markers.h), linked with the same writer the C ABI uses.
//
// Built against CPython's limited API (the stable ABI of 3.8), so one
// `_markers.abi3.so` serves every CPython from 3.8 on and one wheel serves
// them all (docs/packaging.md). The calls a training loop makes every step
// (step_begin/step_end, phase_begin/phase_end, step() and phase() with their
// context managers) take their arguments without an argument tuple or dict:
// METH_FASTCALL (below). The goal for a Python marker is at most 1.5x what a
// perf_counter() pair and a list append cost (bench/markers_benchmark.sh).
#define Py_LIMITED_API 0x03080000
#include <Python.h>
#include <structmember.h>

#include <cstdint>
#include <cstring>
#include <ctime>
#include <string>
#include <algorithm>

#include "gputriage/markers.hpp"

namespace {

// METH_FASTCALL: (self, PyObject* const* args, Py_ssize_t nargs[, PyObject*
// kwnames]). The stable ABI lists it from 3.10, so 3.8's limited headers leave
// it out and it is named here; its value and calling convention are the same in
// every CPython from 3.7, and 3.8 and 3.9 are finished releases whose ABI no
// longer changes. METH_VARARGS cost 3.8 about 80 ns more per marked step (a
// step() context: 1.77x the naive loop against the 1.5x goal).
constexpr int kMethFastcall = 0x0080;

// ---- Loop state shared by Step, watch() and the zero-code hooks --------------
// One training loop per process is the norm; the GIL serialises access.
// watch() and the zero-code DataLoader hook open an "automatic" step after each
// batch arrives; a Step entered inside it adopts that step (the loop marks its
// own steps from then on, and automatic steps stop).
int64_t g_next_step = 0;
int64_t g_auto_step = -1;         // the open automatic step, -1 when none
bool g_explicit_steps = false;    // a Step context was used: automatic steps stop
// gputriage.time_device(): an object with begin(step) and end(step) that times
// each step on the GPU (python/gputriage/device.py); null when off.
PyObject* g_device_timer = nullptr;
PyObject* g_str_begin = nullptr;
PyObject* g_str_end = nullptr;
// A timer with phase_begin(phase) / phase_end(phase) also times the step's
// device-side phases (forward, backward, optimizer, copy) on the GPU.
bool g_timer_phases = false;
PyObject* g_str_phase_begin = nullptr;
PyObject* g_str_phase_end = nullptr;

/// Tells the device timer a step began or ended; false with a Python error set.
bool DeviceTimer(PyObject* method, int64_t step) {
  if (g_device_timer == nullptr) return true;
  PyObject* number = PyLong_FromLongLong(step);
  if (number == nullptr) return false;
  PyObject* result = PyObject_CallMethodObjArgs(g_device_timer, method, number, nullptr);
  Py_DECREF(number);
  Py_XDECREF(result);
  return result != nullptr;
}

/// Tells a phase-timing device timer that a device-timed phase began or ended;
/// false with a Python error set.
bool DevicePhase(PyObject* method, gputriage_phase phase) {
  if (g_device_timer == nullptr || !g_timer_phases) return true;
  if (phase != GPUTRIAGE_PHASE_FORWARD && phase != GPUTRIAGE_PHASE_BACKWARD && phase != GPUTRIAGE_PHASE_OPTIMIZER &&
      phase != GPUTRIAGE_PHASE_COPY)
    return true;
  PyObject* id = PyLong_FromLong(static_cast<long>(phase));
  if (id == nullptr) return false;
  PyObject* result = PyObject_CallMethodObjArgs(g_device_timer, method, id, nullptr);
  Py_DECREF(id);
  Py_XDECREF(result);
  return result != nullptr;
}

// The memory sampler (python/gputriage/memory.py): called with the step's number
// as a step ends, at most once per interval, so a loop of short steps pays for a
// few reads a second, not one per step. Null when off.
PyObject* g_memory_sampler = nullptr;
int64_t g_memory_interval_ns = 0;
int64_t g_memory_next_ns = 0;

int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);  // a few ns; its ~4 ms grain is finer than the interval
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

/// After a step ended: samples its memory when the interval has passed. A
/// sampler that raises is turned off (with its error printed), never the loop.
void MemoryAfterStep(int64_t step) {
  if (g_memory_sampler == nullptr) return;
  const int64_t now = MonotonicNs();
  if (now < g_memory_next_ns) return;
  g_memory_next_ns = now + g_memory_interval_ns;
  PyObject* number = PyLong_FromLongLong(step);
  PyObject* result = number == nullptr ? nullptr : PyObject_CallFunctionObjArgs(g_memory_sampler, number, nullptr);
  Py_XDECREF(number);
  if (result != nullptr) {
    Py_DECREF(result);
    return;
  }
  PySys_WriteStderr("gputriage: the memory sampler failed and is off:\n");
  PyErr_Print();
  Py_CLEAR(g_memory_sampler);
}

bool ToInt64(PyObject* o, int64_t* out, const char* what) {
  const long long v = PyLong_AsLongLong(o);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "gputriage: %s must be an int, not %R", what, reinterpret_cast<PyObject*>(Py_TYPE(o)));
    return false;
  }
  *out = v;
  return true;
}

bool ToDouble(PyObject* o, double* out, const char* what) {
  const double v = PyFloat_AsDouble(o);
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "gputriage: %s must be a number, not %R", what,
                 reinterpret_cast<PyObject*>(Py_TYPE(o)));
    return false;
  }
  *out = v;
  return true;
}

// The phases' names, interned at import: a name written in the loop's source is
// interned too, so a pointer comparison usually settles it.
PyObject* g_phase_names[gputriage::kLastPhase + 1] = {};

/// The phase id for a name ("data", "forward", ...) or an int id.
bool ToPhase(PyObject* o, gputriage_phase* out) {
  if (PyUnicode_Check(o)) {
    for (int id = GPUTRIAGE_PHASE_DATA; id <= gputriage::kLastPhase; ++id)
      if (o == g_phase_names[id]) {
        *out = static_cast<gputriage_phase>(id);
        return true;
      }
    for (int id = GPUTRIAGE_PHASE_DATA; id <= gputriage::kLastPhase; ++id)
      if (PyUnicode_CompareWithASCIIString(o, gputriage::PhaseName(id)) == 0) {
        *out = static_cast<gputriage_phase>(id);
        return true;
      }
    if (PyErr_Occurred()) return false;
    PyErr_Format(PyExc_ValueError,
                 "gputriage: unknown phase %R (data, forward, backward, optimizer, communication, checkpoint, "
                 "other, eval, compile, restore)",
                 o);
    return false;
  }
  int64_t id = 0;
  if (!ToInt64(o, &id, "phase")) return false;
  if (id < GPUTRIAGE_PHASE_DATA || id > gputriage::kLastPhase) {
    PyErr_Format(PyExc_ValueError, "gputriage: phase id %lld is not 1..%d", static_cast<long long>(id),
                 gputriage::kLastPhase);
    return false;
  }
  *out = static_cast<gputriage_phase>(id);
  return true;
}

// Keyword names, interned at import: calls pass interned names, so a pointer
// comparison usually settles each one.
enum Keyword { kKwStep, kKwSamples, kKwTokens, kKwFlops, kNumKeywords };
constexpr const char* kKeywordNames[kNumKeywords] = {"step", "samples", "tokens", "flops"};
PyObject* g_keywords[kNumKeywords] = {};

/// Puts fastcall arguments into `slot` in the order of `params` (positional
/// first, then by keyword); a missing one stays null.
bool SortArguments(const char* function, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                   const Keyword* params, int nparams, PyObject** slot) {
  if (nargs > nparams) {
    PyErr_Format(PyExc_TypeError, "gputriage.%s takes at most %d arguments", function, nparams);
    return false;
  }
  for (int i = 0; i < nparams; ++i) slot[i] = i < nargs ? args[i] : nullptr;
  const Py_ssize_t nkw = kwnames ? PyTuple_Size(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* name = PyTuple_GetItem(kwnames, k);
    int found = -1;
    for (int i = 0; i < nparams && found < 0; ++i)
      if (name == g_keywords[params[i]]) found = i;
    for (int i = 0; i < nparams && found < 0; ++i)
      if (PyUnicode_Compare(name, g_keywords[params[i]]) == 0) found = i;
    if (found < 0 || slot[found] != nullptr) {
      PyErr_Format(PyExc_TypeError, "gputriage.%s: unexpected or repeated argument '%U'", function, name);
      return false;
    }
    slot[found] = args[nargs + k];
  }
  return true;
}

// ---- The call conventions ---------------------------------------------------
// Each function below is written in METH_FASTCALL's form. Varargs<> calls one
// with an argument tuple and keyword dict laid out the same way (a type's
// tp_new gets those).
using FastFunction = PyObject* (*)(PyObject*, PyObject* const*, Py_ssize_t, PyObject*);

constexpr Py_ssize_t kMaxArguments = 8;

template <FastFunction F>
PyObject* Varargs(PyObject* self, PyObject* args, PyObject* kwargs) {
  PyObject* items[kMaxArguments];
  const Py_ssize_t nargs = PyTuple_Size(args);
  const Py_ssize_t nkw = kwargs != nullptr ? PyDict_Size(kwargs) : 0;
  if (nargs < 0 || nkw < 0) return nullptr;
  if (nargs + nkw > kMaxArguments) {
    PyErr_SetString(PyExc_TypeError, "gputriage: too many arguments");
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) items[i] = PyTuple_GetItem(args, i);
  PyObject* kwnames = nullptr;
  if (nkw > 0) {
    kwnames = PyTuple_New(nkw);
    if (kwnames == nullptr) return nullptr;
    PyObject *key, *value;
    Py_ssize_t pos = 0, k = 0;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      Py_INCREF(key);
      PyTuple_SetItem(kwnames, k, key);
      items[nargs + k++] = value;
    }
  }
  PyObject* result = F(self, items, nargs, kwnames);
  Py_XDECREF(kwnames);
  return result;
}

/// A method table entry for a METH_FASTCALL function.
template <FastFunction F>
PyMethodDef Method(const char* name, const char* doc) {
  return {name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(F)), kMethFastcall | METH_KEYWORDS, doc};
}

/// A function that takes exactly `n` positional arguments.
bool Positional(const char* function, Py_ssize_t nargs, PyObject* kwnames, Py_ssize_t n) {
  if (nargs == n && (kwnames == nullptr || PyTuple_Size(kwnames) == 0)) return true;
  PyErr_Format(PyExc_TypeError, "gputriage.%s takes %zd positional arguments", function, n);
  return false;
}

// ---- Steps and phases -----------------------------------------------------

/// step_end(step, samples=0, tokens=0, flops=0.0) arguments, positional or by keyword.
bool ParseStepEnd(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, int64_t* step, int64_t* samples,
                  int64_t* tokens, double* flops) {
  static constexpr Keyword kParams[] = {kKwStep, kKwSamples, kKwTokens, kKwFlops};
  PyObject* slot[4];
  if (!SortArguments("step_end", args, nargs, kwnames, kParams, 4, slot)) return false;
  if (slot[0] == nullptr) {
    PyErr_SetString(PyExc_TypeError, "gputriage.step_end: missing the step number");
    return false;
  }
  return ToInt64(slot[0], step, "step") && (slot[1] == nullptr || ToInt64(slot[1], samples, "samples")) &&
         (slot[2] == nullptr || ToInt64(slot[2], tokens, "tokens")) &&
         (slot[3] == nullptr || ToDouble(slot[3], flops, "flops"));
}

PyObject* StepBegin(PyObject*, PyObject* arg) {
  int64_t step = 0;
  if (!ToInt64(arg, &step, "step")) return nullptr;
  gputriage_step_begin(step);
  Py_RETURN_NONE;
}

PyObject* StepEnd(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  int64_t step = 0, samples = 0, tokens = 0;
  double flops = 0;
  if (!ParseStepEnd(args, nargs, kwnames, &step, &samples, &tokens, &flops)) return nullptr;
  gputriage_step_end(step, samples, tokens, flops);
  MemoryAfterStep(step);
  Py_RETURN_NONE;
}

PyObject* PhaseBegin(PyObject*, PyObject* arg) {
  gputriage_phase phase{};
  if (!ToPhase(arg, &phase)) return nullptr;
  gputriage_phase_begin(phase);
  if (!DevicePhase(g_str_phase_begin, phase)) return nullptr;
  Py_RETURN_NONE;
}

PyObject* PhaseEnd(PyObject*, PyObject* arg) {
  gputriage_phase phase{};
  if (!ToPhase(arg, &phase)) return nullptr;
  if (!DevicePhase(g_str_phase_end, phase)) return nullptr;
  gputriage_phase_end(phase);
  Py_RETURN_NONE;
}

PyObject* Clock(PyObject*, PyObject*) { return PyLong_FromLongLong(gputriage_markers_clock()); }

/// _phase_switch_at(from, to, t): `from` ends and `to` begins at the earlier
/// clock reading `t` (zero-code mode's DDP hook: the wait for the all-reduce).
PyObject* PhaseSwitchAt(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  gputriage_phase from{}, to{};
  int64_t t = 0;
  if (!Positional("_phase_switch_at(from, to, t)", nargs, kwnames, 3)) return nullptr;
  if (!ToPhase(args[0], &from) || !ToPhase(args[1], &to) || !ToInt64(args[2], &t, "t")) return nullptr;
  if (!DevicePhase(g_str_phase_end, from)) return nullptr;
  gputriage_phase_switch_at(from, to, t);
  if (!DevicePhase(g_str_phase_begin, to)) return nullptr;
  Py_RETURN_NONE;
}

/// Opens an automatic step at `at` (-1: now), closing one never closed; its
/// number, or None once the loop marks its own steps.
PyObject* OpenAutoStep(int64_t at) {
  if (g_explicit_steps) Py_RETURN_NONE;
  if (g_auto_step >= 0) {  // never closed: close it bare
    gputriage_step_end(g_auto_step, 0, 0, 0);
    if (!DeviceTimer(g_str_end, g_auto_step)) return nullptr;
    MemoryAfterStep(g_auto_step);
  }
  g_auto_step = g_next_step++;
  if (at < 0) gputriage_step_begin(g_auto_step);
  else gputriage_step_begin_at(g_auto_step, at);
  if (!DeviceTimer(g_str_begin, g_auto_step)) return nullptr;
  return PyLong_FromLongLong(g_auto_step);
}

/// Opens an automatic step (watch(), zero-code mode) after a batch arrived.
PyObject* AutoStepBegin(PyObject*, PyObject*) { return OpenAutoStep(-1); }

/// Opens an automatic step that began at an earlier clock reading `t` (a loop
/// stepped by its optimizer: the step began where the last optimizer step returned).
PyObject* AutoStepBeginAt(PyObject*, PyObject* arg) {
  int64_t t = 0;
  if (!ToInt64(arg, &t, "t")) return nullptr;
  return OpenAutoStep(t < 0 ? -1 : t);  // a reading before the clock's start: now
}

/// Closes the open automatic step, if it is still open (a Step inside it took it over otherwise).
PyObject* AutoStepEnd(PyObject*, PyObject* arg) {
  int64_t samples = 0;
  if (arg != Py_None && !ToInt64(arg, &samples, "samples")) return nullptr;
  if (g_auto_step >= 0) {
    const int64_t step = g_auto_step;
    g_auto_step = -1;
    gputriage_step_end(step, samples, 0, 0);
    if (!DeviceTimer(g_str_end, step)) return nullptr;
    MemoryAfterStep(step);
  }
  Py_RETURN_NONE;
}

// ---- Step: `with gputriage.step(samples=..., tokens=..., flops=...):` -------

struct StepObject {
  PyObject_HEAD
  long long number;   // -1 until entered when not given
  long long samples;
  long long tokens;
  double flops;
  int adopted;  // took over an open automatic step: its begin was already written
};

PyTypeObject* g_step_type = nullptr;

// Freed step objects kept for the next step: a loop makes one per step. A kept
// object holds no reference to its type (dealloc gave it back; PyObject_Init
// takes it again).
constexpr int kStepFreeListMax = 16;
StepObject* g_step_free_list[kStepFreeListMax];
int g_step_free_count = 0;

void StepDealloc(PyObject* self_obj) {
  PyTypeObject* type = Py_TYPE(self_obj);
  if (g_step_free_count < kStepFreeListMax) {
    g_step_free_list[g_step_free_count++] = reinterpret_cast<StepObject*>(self_obj);
  } else {
    PyObject_Free(self_obj);
  }
  Py_DECREF(reinterpret_cast<PyObject*>(type));  // instances of a heap type hold a reference to it
}

/// step(samples=0, tokens=0, flops=0.0, step=None); the object often comes from the free list.
PyObject* StepNew(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  static constexpr Keyword kParams[] = {kKwSamples, kKwTokens, kKwFlops, kKwStep};
  PyObject* slot[4];
  if (!SortArguments("step", args, nargs, kwnames, kParams, 4, slot)) return nullptr;
  int64_t samples = 0, tokens = 0, number = -1;
  double flops = 0;
  if ((slot[0] && !ToInt64(slot[0], &samples, "samples")) || (slot[1] && !ToInt64(slot[1], &tokens, "tokens")) ||
      (slot[2] && !ToDouble(slot[2], &flops, "flops")) ||
      (slot[3] && slot[3] != Py_None && !ToInt64(slot[3], &number, "step")))
    return nullptr;
  if (slot[3] && slot[3] != Py_None && number < 0) {
    PyErr_SetString(PyExc_ValueError, "gputriage.step: step numbers are >= 0");
    return nullptr;
  }
  StepObject* self;
  if (g_step_free_count > 0) {
    self = g_step_free_list[--g_step_free_count];
    PyObject_Init(reinterpret_cast<PyObject*>(self), g_step_type);
  } else {
    self = PyObject_New(StepObject, g_step_type);
    if (self == nullptr) return nullptr;
  }
  self->number = number;
  self->samples = samples;
  self->tokens = tokens;
  self->flops = flops;
  self->adopted = 0;
  return reinterpret_cast<PyObject*>(self);
}

PyObject* StepNewFromTuple(PyTypeObject*, PyObject* args, PyObject* kwargs) {
  return Varargs<StepNew>(nullptr, args, kwargs);  // _Step(...) called directly: as step(...)
}

PyObject* StepEnter(PyObject* self_obj, PyObject*) {
  auto* self = reinterpret_cast<StepObject*>(self_obj);
  g_explicit_steps = true;
  if (g_auto_step >= 0 && self->number < 0) {  // inside watch(): this is that step
    self->number = g_auto_step;
    self->adopted = 1;
    g_auto_step = -1;
  } else {
    if (self->number < 0) self->number = g_next_step++;
    gputriage_step_begin(self->number);
    if (!DeviceTimer(g_str_begin, self->number)) return nullptr;
  }
  Py_INCREF(self_obj);
  return self_obj;
}

PyObject* StepExit(PyObject* self_obj, PyObject* const*, Py_ssize_t, PyObject*) {
  auto* self = reinterpret_cast<StepObject*>(self_obj);
  gputriage_step_end(self->number, self->samples, self->tokens, self->flops);
  if (self->number >= g_next_step) g_next_step = self->number + 1;
  if (!DeviceTimer(g_str_end, self->number)) return nullptr;
  MemoryAfterStep(self->number);
  Py_RETURN_FALSE;  // exceptions propagate
}

PyMethodDef g_step_methods[3];

PyMemberDef kStepMembers[] = {
    {"number", T_LONGLONG, offsetof(StepObject, number), READONLY, "the step number (-1 until entered)"},
    {"samples", T_LONGLONG, offsetof(StepObject, samples), 0, "samples in this step (set it inside the step if only known then)"},
    {"tokens", T_LONGLONG, offsetof(StepObject, tokens), 0, "tokens in this step"},
    {"flops", T_DOUBLE, offsetof(StepObject, flops), 0, "model FLOPs of this step (for MFU)"},
    {nullptr, 0, 0, 0, nullptr}};

constexpr const char* kStepDoc =
    "step(samples=0, tokens=0, flops=0.0, step=None): one training step, as a context manager.\n"
    "Steps are numbered in order unless `step` is given.";

// ---- Phase: `with gputriage.phase("data"):` ---------------------------------
// Stateless, so phase(name) hands out one shared object per phase.

struct PhaseObject {
  PyObject_HEAD
  int phase;
};

PyObject* PhaseEnter(PyObject* self_obj, PyObject*) {
  const auto phase = static_cast<gputriage_phase>(reinterpret_cast<PhaseObject*>(self_obj)->phase);
  gputriage_phase_begin(phase);
  if (!DevicePhase(g_str_phase_begin, phase)) return nullptr;
  Py_INCREF(self_obj);
  return self_obj;
}

PyObject* PhaseExit(PyObject* self_obj, PyObject* const*, Py_ssize_t, PyObject*) {
  const auto phase = static_cast<gputriage_phase>(reinterpret_cast<PhaseObject*>(self_obj)->phase);
  if (!DevicePhase(g_str_phase_end, phase)) return nullptr;
  gputriage_phase_end(phase);
  Py_RETURN_FALSE;
}

PyMethodDef g_phase_methods[3];

PyMemberDef kPhaseMembers[] = {{"id", T_INT, offsetof(PhaseObject, phase), READONLY, "the phase id (markers.h)"},
                               {nullptr, 0, 0, 0, nullptr}};

PyObject* g_phase_objects[gputriage::kLastPhase + 1] = {};

PyObject* Phase(PyObject*, PyObject* arg) {
  gputriage_phase phase{};
  if (!ToPhase(arg, &phase)) return nullptr;
  PyObject* o = g_phase_objects[phase];
  Py_INCREF(o);
  return o;
}

// ---- Device times, memory and settings ---------------------------------------

PyObject* StepDeviceTime(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  int64_t step = 0, device_ns = 0;
  if (!Positional("step_device_time(step, device_ns)", nargs, kwnames, 2)) return nullptr;
  if (!ToInt64(args[0], &step, "step") || !ToInt64(args[1], &device_ns, "device_ns")) return nullptr;
  gputriage_step_device_time(step, device_ns);
  Py_RETURN_NONE;
}

PyObject* PhaseDeviceTime(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  int64_t step = 0, device_ns = 0;
  gputriage_phase phase{};
  if (!Positional("phase_device_time(step, phase, device_ns)", nargs, kwnames, 3)) return nullptr;
  if (!ToInt64(args[0], &step, "step") || !ToPhase(args[1], &phase) || !ToInt64(args[2], &device_ns, "device_ns"))
    return nullptr;
  gputriage_phase_device_time(step, phase, device_ns);
  Py_RETURN_NONE;
}

/// _set_device_timer(timer or None): steps call timer.begin(step) / timer.end(step).
PyObject* SetDeviceTimer(PyObject*, PyObject* timer) {
  Py_CLEAR(g_device_timer);
  g_timer_phases = false;
  if (timer != Py_None) {
    Py_INCREF(timer);
    g_device_timer = timer;
    g_timer_phases = PyObject_HasAttr(timer, g_str_phase_begin) && PyObject_HasAttr(timer, g_str_phase_end);
  }
  Py_RETURN_NONE;
}

PyObject* Enabled(PyObject*, PyObject*) { return PyBool_FromLong(gputriage_markers_enabled() != 0); }

PyObject* LastStep(PyObject*, PyObject*) {
  if (g_auto_step >= 0) return PyLong_FromLongLong(g_auto_step);
  if (g_next_step > 0) return PyLong_FromLongLong(g_next_step - 1);
  Py_RETURN_NONE;
}

PyObject* SetMemorySampler(PyObject*, PyObject* args) {
  PyObject* sampler = nullptr;
  long long interval_ns = 0;
  if (!PyArg_ParseTuple(args, "OL:_set_memory_sampler", &sampler, &interval_ns)) return nullptr;
  Py_CLEAR(g_memory_sampler);
  if (sampler != Py_None) {
    Py_INCREF(sampler);
    g_memory_sampler = sampler;
  }
  g_memory_interval_ns = std::max<int64_t>(0, interval_ns);
  g_memory_next_ns = 0;  // the next step's end is sampled
  Py_RETURN_NONE;
}

PyObject* StepMemory(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kNames[] = {"step", "device", "current_bytes", "peak_bytes", "reserved_bytes", nullptr};
  long long step = 0, current = 0, peak = 0, reserved = 0;
  int device = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "LiLL|L:step_memory", const_cast<char**>(kNames), &step, &device,
                                   &current, &peak, &reserved))
    return nullptr;
  if (device < GPUTRIAGE_HOST_MEMORY || device > GPUTRIAGE_MAX_MEMORY_DEVICE) {
    PyErr_Format(PyExc_ValueError, "gputriage.step_memory: device is -1 (the host) or 0..%d",
                 GPUTRIAGE_MAX_MEMORY_DEVICE);
    return nullptr;
  }
  gputriage_step_memory(step, device, current, peak, reserved);
  Py_RETURN_NONE;
}

PyObject* StepMemoryEvents(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kNames[] = {"step", "device", "alloc_retries", "ooms", nullptr};
  long long step = 0, retries = 0, ooms = 0;
  int device = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "LiLL:step_memory_events", const_cast<char**>(kNames), &step,
                                   &device, &retries, &ooms))
    return nullptr;
  if (device < 0 || device > GPUTRIAGE_MAX_MEMORY_DEVICE) {
    PyErr_Format(PyExc_ValueError, "gputriage.step_memory_events: device is 0..%d", GPUTRIAGE_MAX_MEMORY_DEVICE);
    return nullptr;
  }
  gputriage_step_memory_events(step, device, retries, ooms);
  Py_RETURN_NONE;
}

// Filled at import.
PyMethodDef g_functions[25];

void FillMethodTables() {
  int n = 0;
  g_functions[n++] = {"step_begin", StepBegin, METH_O, "step_begin(step): a training step begins."};
  g_functions[n++] = Method<StepEnd>("step_end", "step_end(step, samples=0, tokens=0, flops=0.0): the step ends.");
  g_functions[n++] = {"phase_begin", PhaseBegin, METH_O, "phase_begin(name_or_id): a phase begins on this thread."};
  g_functions[n++] = {"phase_end", PhaseEnd, METH_O, "phase_end(name_or_id): the phase ends on this thread."};
  g_functions[n++] = {"phase", Phase, METH_O, "phase(name): a context manager marking that phase of the step."};
  g_functions[n++] = Method<StepNew>("step", kStepDoc);
  g_functions[n++] = Method<StepDeviceTime>(
      "step_device_time", "step_device_time(step, device_ns): the step's GPU time, measured on the device.");
  g_functions[n++] = Method<PhaseDeviceTime>(
      "phase_device_time",
      "phase_device_time(step, phase, device_ns): a phase's GPU time in that step, measured on the device.");
  g_functions[n++] = {"_clock", Clock, METH_NOARGS, "The marker clock now (for _phase_switch_at)."};
  g_functions[n++] = Method<PhaseSwitchAt>(
      "_phase_switch_at", "_phase_switch_at(from, to, t): phase `from` ends and `to` begins at the earlier clock reading t.");
  g_functions[n++] = {"_set_device_timer", SetDeviceTimer, METH_O, "Installs the per-step device timer (None: off)."};
  g_functions[n++] = {"_auto_step_begin", AutoStepBegin, METH_NOARGS, "Opens an automatic step (watch, zero-code mode)."};
  g_functions[n++] = {"_auto_step_end", AutoStepEnd, METH_O, "Closes the open automatic step with its samples (or None)."};
  g_functions[n++] = {"_auto_step_begin_at", AutoStepBeginAt, METH_O,
                      "_auto_step_begin_at(t): opens an automatic step that began at the earlier clock reading t."};
  g_functions[n++] = {"enabled", Enabled, METH_NOARGS, "Whether `gputriage record` is reading this process's markers."};
  g_functions[n++] = {"_last_step", LastStep, METH_NOARGS,
                      "The step open now, else the last one begun (None before any): where an error struck."};
  g_functions[n++] = {"_set_memory_sampler", SetMemorySampler, METH_VARARGS,
                      "_set_memory_sampler(callable or None, interval_ns): call it with the step number as a step ends, "
                      "at most once per interval."};
  g_functions[n++] = {"step_memory", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(StepMemory)),
                      METH_VARARGS | METH_KEYWORDS,
                      "step_memory(step, device, current_bytes, peak_bytes, reserved_bytes=0): the process's memory at "
                      "the step's end (device -1: the host's resident set and its high-water mark)."};
  g_functions[n++] = {"step_memory_events",
                      reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(StepMemoryEvents)),
                      METH_VARARGS | METH_KEYWORDS,
                      "step_memory_events(step, device, alloc_retries, ooms): the CUDA allocator's retries and "
                      "out-of-memory errors so far."};
  g_functions[n] = {nullptr, nullptr, 0, nullptr};

  g_step_methods[0] = {"__enter__", StepEnter, METH_NOARGS, "Marks the step's beginning."};
  g_step_methods[1] = Method<StepExit>("__exit__", "Marks the step's end with its samples, tokens and FLOPs.");
  g_step_methods[2] = {nullptr, nullptr, 0, nullptr};
  g_phase_methods[0] = {"__enter__", PhaseEnter, METH_NOARGS, "Marks the phase's beginning on this thread."};
  g_phase_methods[1] = Method<PhaseExit>("__exit__", "Marks the phase's end.");
  g_phase_methods[2] = {nullptr, nullptr, 0, nullptr};
}

PyTypeObject* MakeType(const char* name, int basicsize, PyType_Slot* slots) {
  PyType_Spec spec{name, basicsize, 0, Py_TPFLAGS_DEFAULT, slots};
  return reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
}

bool AddObject(PyObject* module, const char* name, PyObject* value) {
  if (value == nullptr) return false;
  if (PyModule_AddObject(module, name, value) < 0) {  // steals the reference only on success
    Py_DECREF(value);
    return false;
  }
  return true;
}

bool Initialise(PyObject* m) {
  FillMethodTables();
  g_str_begin = PyUnicode_InternFromString("begin");
  g_str_end = PyUnicode_InternFromString("end");
  g_str_phase_begin = PyUnicode_InternFromString("phase_begin");
  g_str_phase_end = PyUnicode_InternFromString("phase_end");
  if (!g_str_begin || !g_str_end || !g_str_phase_begin || !g_str_phase_end) return false;
  for (int k = 0; k < kNumKeywords; ++k)
    if ((g_keywords[k] = PyUnicode_InternFromString(kKeywordNames[k])) == nullptr) return false;

  static PyType_Slot step_slots[] = {{Py_tp_dealloc, reinterpret_cast<void*>(StepDealloc)},
                                     {Py_tp_new, reinterpret_cast<void*>(StepNewFromTuple)},
                                     {Py_tp_methods, g_step_methods},
                                     {Py_tp_members, kStepMembers},
                                     {Py_tp_doc, const_cast<char*>(kStepDoc)},
                                     {0, nullptr}};
  static PyType_Slot phase_slots[] = {
      {Py_tp_methods, g_phase_methods},
      {Py_tp_members, kPhaseMembers},
      {Py_tp_doc, const_cast<char*>("A phase of a step, as a context manager (made by gputriage.phase(name)).")},
      {0, nullptr}};
  g_step_type = MakeType("gputriage._Step", sizeof(StepObject), step_slots);
  PyTypeObject* phase_type = MakeType("gputriage._Phase", sizeof(PhaseObject), phase_slots);
  if (g_step_type == nullptr || phase_type == nullptr) return false;
  Py_INCREF(reinterpret_cast<PyObject*>(g_step_type));  // ours, beside the module's
  if (!AddObject(m, "_Step", reinterpret_cast<PyObject*>(g_step_type)) ||
      !AddObject(m, "_Phase", reinterpret_cast<PyObject*>(phase_type)))
    return false;

  PyObject* phases = PyDict_New();
  if (phases == nullptr) return false;
  for (int p = GPUTRIAGE_PHASE_DATA; p <= gputriage::kLastPhase; ++p) {
    auto* o = PyObject_New(PhaseObject, phase_type);
    if (o == nullptr) return false;
    o->phase = p;
    g_phase_objects[p] = reinterpret_cast<PyObject*>(o);
    if ((g_phase_names[p] = PyUnicode_InternFromString(gputriage::PhaseName(p))) == nullptr) return false;
    PyObject* id = PyLong_FromLong(p);
    if (id == nullptr || PyDict_SetItem(phases, g_phase_names[p], id) < 0) return false;
    Py_DECREF(id);
  }
  if (!AddObject(m, "PHASES", phases)) return false;
  PyObject* module_name = PyModule_GetNameObject(m);
  if (module_name == nullptr) return false;
  for (PyMethodDef* def = g_functions; def->ml_name != nullptr; ++def)
    if (!AddObject(m, def->ml_name, PyCFunction_NewEx(def, nullptr, module_name))) return false;
  Py_DECREF(module_name);
  return PyModule_AddIntConstant(m, "ABI_VERSION", GPUTRIAGE_MARKERS_ABI_VERSION) == 0;
}

PyModuleDef g_module = {PyModuleDef_HEAD_INIT,
                        "_markers",
                        "gputriage step markers (include/gputriage/markers.h) for Python; use the gputriage package.",
                        -1,
                        nullptr,
                        nullptr,
                        nullptr,
                        nullptr,
                        nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__markers(void) {
  PyObject* m = PyModule_Create(&g_module);
  if (m == nullptr) return nullptr;
  if (!Initialise(m)) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
