// gputriage._markers: the Python binding of the step markers
// (include/gputriage/markers.h), linked with the same writer the C ABI uses.
//
// pybind11 builds the module and its slow-path functions. The calls a training
// loop makes every step (step_begin/step_end, phase_begin/phase_end, and the
// Step and Phase context managers) are plain CPython fastcall functions and
// small C types instead: pybind11's generic argument conversion costs about
// 100 ns a call, several times the 24 ns marker, and the goal for a Python
// marker is at most 1.5x what a perf_counter() pair and a list append cost.
#include <Python.h>
#include <structmember.h>

#include <pybind11/pybind11.h>

#include <cstdint>
#include <cstring>
#include <ctime>
#include <string>
#include <algorithm>

#include "gputriage/markers.hpp"

namespace {

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
  PyObject* result = PyObject_CallMethodOneArg(g_device_timer, method, number);
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
  PyObject* result = PyObject_CallMethodOneArg(g_device_timer, method, id);
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
  PyObject* result = number == nullptr ? nullptr : PyObject_CallOneArg(g_memory_sampler, number);
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
    PyErr_Format(PyExc_TypeError, "gputriage: %s must be an int, not %.100s", what, Py_TYPE(o)->tp_name);
    return false;
  }
  *out = v;
  return true;
}

bool ToDouble(PyObject* o, double* out, const char* what) {
  const double v = PyFloat_AsDouble(o);
  if (v == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "gputriage: %s must be a number, not %.100s", what, Py_TYPE(o)->tp_name);
    return false;
  }
  *out = v;
  return true;
}

/// The phase id for a name ("data", "forward", ...) or an int id.
bool ToPhase(PyObject* o, gputriage_phase* out) {
  if (PyUnicode_Check(o)) {
    const char* s = PyUnicode_AsUTF8(o);
    if (s == nullptr) return false;
    for (int id = GPUTRIAGE_PHASE_DATA; id <= gputriage::kLastPhase; ++id)
      if (std::strcmp(s, gputriage::PhaseName(id)) == 0) {
        *out = static_cast<gputriage_phase>(id);
        return true;
      }
    PyErr_Format(PyExc_ValueError,
                 "gputriage: unknown phase '%s' (data, forward, backward, optimizer, communication, checkpoint, "
                 "other, eval, compile, restore)",
                 s);
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
  const Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    PyObject* name = PyTuple_GET_ITEM(kwnames, k);
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
  if (!ParseStepEnd(args, PyVectorcall_NARGS(nargs), kwnames, &step, &samples, &tokens, &flops)) return nullptr;
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
PyObject* PhaseSwitchAt(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  gputriage_phase from{}, to{};
  int64_t t = 0;
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "gputriage._phase_switch_at(from, to, t) takes 3 arguments");
    return nullptr;
  }
  if (!ToPhase(args[0], &from) || !ToPhase(args[1], &to) || !ToInt64(args[2], &t, "t")) return nullptr;
  if (!DevicePhase(g_str_phase_end, from)) return nullptr;
  gputriage_phase_switch_at(from, to, t);
  if (!DevicePhase(g_str_phase_begin, to)) return nullptr;
  Py_RETURN_NONE;
}

/// Opens an automatic step (watch(), zero-code mode) after a batch arrived;
/// returns its number, or None once the loop marks its own steps.
PyObject* AutoStepBegin(PyObject*, PyObject*) {
  if (g_explicit_steps) Py_RETURN_NONE;
  if (g_auto_step >= 0) {  // never closed: close it bare
    gputriage_step_end(g_auto_step, 0, 0, 0);
    if (!DeviceTimer(g_str_end, g_auto_step)) return nullptr;
    MemoryAfterStep(g_auto_step);
  }
  g_auto_step = g_next_step++;
  gputriage_step_begin(g_auto_step);
  if (!DeviceTimer(g_str_begin, g_auto_step)) return nullptr;
  return PyLong_FromLongLong(g_auto_step);
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

// Freed step objects kept for the next step: a loop makes one per step.
constexpr int kStepFreeListMax = 16;
StepObject* g_step_free_list[kStepFreeListMax];
int g_step_free_count = 0;

extern PyTypeObject StepType;

void StepDealloc(PyObject* self_obj) {
  if (g_step_free_count < kStepFreeListMax) {
    g_step_free_list[g_step_free_count++] = reinterpret_cast<StepObject*>(self_obj);
    return;
  }
  PyObject_Free(self_obj);
}

/// step(samples=0, tokens=0, flops=0.0, step=None), called through vectorcall:
/// no argument tuple or dict is built, and the object often comes from the free list.
PyObject* StepNew(PyObject*, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  static constexpr Keyword kParams[] = {kKwSamples, kKwTokens, kKwFlops, kKwStep};
  PyObject* slot[4];
  if (!SortArguments("step", args, PyVectorcall_NARGS(nargsf), kwnames, kParams, 4, slot)) return nullptr;
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
    PyObject_Init(reinterpret_cast<PyObject*>(self), &StepType);
  } else {
    self = PyObject_New(StepObject, &StepType);
    if (self == nullptr) return nullptr;
  }
  self->number = number;
  self->samples = samples;
  self->tokens = tokens;
  self->flops = flops;
  self->adopted = 0;
  return reinterpret_cast<PyObject*>(self);
}

PyObject* StepNewFromTuple(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  // The slow path (e.g. a subclass check calling tp_new): repack for StepNew.
  (void)type;
  return PyObject_VectorcallDict(reinterpret_cast<PyObject*>(&StepType), &PyTuple_GET_ITEM(args, 0),
                                 static_cast<size_t>(PyTuple_GET_SIZE(args)), kwargs);
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

PyObject* StepExit(PyObject* self_obj, PyObject* const*, Py_ssize_t) {
  auto* self = reinterpret_cast<StepObject*>(self_obj);
  gputriage_step_end(self->number, self->samples, self->tokens, self->flops);
  if (self->number >= g_next_step) g_next_step = self->number + 1;
  if (!DeviceTimer(g_str_end, self->number)) return nullptr;
  MemoryAfterStep(self->number);
  Py_RETURN_FALSE;  // exceptions propagate
}

PyMethodDef kStepMethods[] = {
    {"__enter__", StepEnter, METH_NOARGS, "Marks the step's beginning."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(StepExit)), METH_FASTCALL,
     "Marks the step's end with its samples, tokens and FLOPs."},
    {nullptr, nullptr, 0, nullptr}};

PyMemberDef kStepMembers[] = {
    {"number", T_LONGLONG, offsetof(StepObject, number), READONLY, "the step number (-1 until entered)"},
    {"samples", T_LONGLONG, offsetof(StepObject, samples), 0, "samples in this step (set it inside the step if only known then)"},
    {"tokens", T_LONGLONG, offsetof(StepObject, tokens), 0, "tokens in this step"},
    {"flops", T_DOUBLE, offsetof(StepObject, flops), 0, "model FLOPs of this step (for MFU)"},
    {nullptr, 0, 0, 0, nullptr}};

PyTypeObject StepType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_vectorcall = StepNew;
  t.tp_dealloc = StepDealloc;
  t.tp_name = "gputriage.step";
  t.tp_basicsize = sizeof(StepObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc =
      "step(samples=0, tokens=0, flops=0.0, step=None): one training step, as a context manager.\n"
      "Steps are numbered in order unless `step` is given.";
  t.tp_methods = kStepMethods;
  t.tp_members = kStepMembers;
  t.tp_new = StepNewFromTuple;
  return t;
}();

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

PyObject* PhaseExit(PyObject* self_obj, PyObject* const*, Py_ssize_t) {
  const auto phase = static_cast<gputriage_phase>(reinterpret_cast<PhaseObject*>(self_obj)->phase);
  if (!DevicePhase(g_str_phase_end, phase)) return nullptr;
  gputriage_phase_end(phase);
  Py_RETURN_FALSE;
}

PyMethodDef kPhaseMethods[] = {
    {"__enter__", PhaseEnter, METH_NOARGS, "Marks the phase's beginning on this thread."},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(PhaseExit)), METH_FASTCALL,
     "Marks the phase's end."},
    {nullptr, nullptr, 0, nullptr}};

PyMemberDef kPhaseMembers[] = {{"id", T_INT, offsetof(PhaseObject, phase), READONLY, "the phase id (markers.h)"},
                               {nullptr, 0, 0, 0, nullptr}};

PyTypeObject PhaseType = [] {
  PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
  t.tp_name = "gputriage._Phase";
  t.tp_basicsize = sizeof(PhaseObject);
  t.tp_flags = Py_TPFLAGS_DEFAULT;
  t.tp_doc = "A phase of a step, as a context manager (made by gputriage.phase(name)).";
  t.tp_methods = kPhaseMethods;
  t.tp_members = kPhaseMembers;
  return t;
}();

PyObject* g_phase_objects[gputriage::kLastPhase + 1] = {};

PyObject* Phase(PyObject*, PyObject* arg) {
  gputriage_phase phase{};
  if (!ToPhase(arg, &phase)) return nullptr;
  PyObject* o = g_phase_objects[phase];
  Py_INCREF(o);
  return o;
}

PyObject* StepDeviceTime(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  int64_t step = 0, device_ns = 0;
  if (nargs != 2) {
    PyErr_SetString(PyExc_TypeError, "gputriage.step_device_time(step, device_ns) takes 2 arguments");
    return nullptr;
  }
  if (!ToInt64(args[0], &step, "step") || !ToInt64(args[1], &device_ns, "device_ns")) return nullptr;
  gputriage_step_device_time(step, device_ns);
  Py_RETURN_NONE;
}

PyObject* PhaseDeviceTime(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  int64_t step = 0, device_ns = 0;
  gputriage_phase phase{};
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "gputriage.phase_device_time(step, phase, device_ns) takes 3 arguments");
    return nullptr;
  }
  if (!ToInt64(args[0], &step, "step") || !ToPhase(args[1], &phase) || !ToInt64(args[2], &device_ns, "device_ns"))
    return nullptr;
  gputriage_phase_device_time(step, phase, device_ns);
  Py_RETURN_NONE;
}

/// _set_device_timer(timer or None): steps call timer.begin(step) / timer.end(step).
PyObject* SetDeviceTimer(PyObject*, PyObject* timer) {
  Py_XDECREF(g_device_timer);
  g_device_timer = nullptr;
  g_timer_phases = false;
  if (timer != Py_None) {
    Py_INCREF(timer);
    g_device_timer = timer;
    g_timer_phases = PyObject_HasAttr(timer, g_str_phase_begin) && PyObject_HasAttr(timer, g_str_phase_end);
  }
  Py_RETURN_NONE;
}

PyMethodDef kHotFunctions[] = {
    {"step_begin", StepBegin, METH_O, "step_begin(step): a training step begins."},
    {"step_end", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(StepEnd)), METH_FASTCALL | METH_KEYWORDS,
     "step_end(step, samples=0, tokens=0, flops=0.0): the step ends."},
    {"phase_begin", PhaseBegin, METH_O, "phase_begin(name_or_id): a phase begins on this thread."},
    {"phase_end", PhaseEnd, METH_O, "phase_end(name_or_id): the phase ends on this thread."},
    {"phase", Phase, METH_O, "phase(name): a context manager marking that phase of the step."},
    {"step_device_time", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(StepDeviceTime)), METH_FASTCALL,
     "step_device_time(step, device_ns): the step's GPU time, measured on the device."},
    {"phase_device_time", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(PhaseDeviceTime)), METH_FASTCALL,
     "phase_device_time(step, phase, device_ns): a phase's GPU time in that step, measured on the device."},
    {"_clock", Clock, METH_NOARGS, "The marker clock now (for _phase_switch_at)."},
    {"_phase_switch_at", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(PhaseSwitchAt)), METH_FASTCALL,
     "_phase_switch_at(from, to, t): phase `from` ends and `to` begins at the earlier clock reading t."},
    {"_set_device_timer", SetDeviceTimer, METH_O, "Installs the per-step device timer (None: off)."},
    {"_auto_step_begin", AutoStepBegin, METH_NOARGS, "Opens an automatic step (watch, zero-code mode)."},
    {"_auto_step_end", AutoStepEnd, METH_O, "Closes the open automatic step with its samples (or None)."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

PYBIND11_MODULE(_markers, m) {
  namespace py = pybind11;
  m.doc() = "gputriage step markers (include/gputriage/markers.h) for Python; use the gputriage package.";
  g_str_begin = PyUnicode_InternFromString("begin");
  g_str_end = PyUnicode_InternFromString("end");
  g_str_phase_begin = PyUnicode_InternFromString("phase_begin");
  g_str_phase_end = PyUnicode_InternFromString("phase_end");
  if (g_str_begin == nullptr || g_str_end == nullptr) throw py::error_already_set();
  for (int k = 0; k < kNumKeywords; ++k)
    if ((g_keywords[k] = PyUnicode_InternFromString(kKeywordNames[k])) == nullptr) throw py::error_already_set();
  if (PyType_Ready(&StepType) < 0 || PyType_Ready(&PhaseType) < 0) throw py::error_already_set();
  m.add_object("step", reinterpret_cast<PyObject*>(&StepType));
  for (int p = GPUTRIAGE_PHASE_DATA; p <= gputriage::kLastPhase; ++p) {
    auto* o = PyObject_New(PhaseObject, &PhaseType);
    if (o == nullptr) throw py::error_already_set();
    o->phase = p;
    g_phase_objects[p] = reinterpret_cast<PyObject*>(o);
  }
  for (PyMethodDef* def = kHotFunctions; def->ml_name != nullptr; ++def) {
    PyObject* f = PyCFunction_NewEx(def, nullptr, m.attr("__name__").ptr());
    if (f == nullptr) throw py::error_already_set();
    m.add_object(def->ml_name, py::reinterpret_steal<py::object>(f));
  }
  m.def("enabled", [] { return gputriage_markers_enabled() != 0; },
        "Whether `gputriage record` is reading this process's markers.");
  m.def(
      "_last_step", []() -> py::object {
        if (g_auto_step >= 0) return py::int_(g_auto_step);
        if (g_next_step > 0) return py::int_(g_next_step - 1);
        return py::none();
      },
      "The step open now, else the last one begun (None before any): where an error struck.");
  m.def(
      "_set_memory_sampler",
      [](py::object sampler, int64_t interval_ns) {
        Py_CLEAR(g_memory_sampler);
        if (!sampler.is_none()) g_memory_sampler = sampler.inc_ref().ptr();
        g_memory_interval_ns = std::max<int64_t>(0, interval_ns);
        g_memory_next_ns = 0;  // the next step's end is sampled
      },
      "_set_memory_sampler(callable or None, interval_ns): call it with the step number as a step ends, at most once "
      "per interval.");
  m.def(
      "step_memory",
      [](int64_t step, int device, int64_t current, int64_t peak, int64_t reserved) {
        if (device < GPUTRIAGE_HOST_MEMORY || device > GPUTRIAGE_MAX_MEMORY_DEVICE)
          throw py::value_error("gputriage.step_memory: device is -1 (the host) or 0.." +
                                std::to_string(GPUTRIAGE_MAX_MEMORY_DEVICE));
        gputriage_step_memory(step, device, current, peak, reserved);
      },
      py::arg("step"), py::arg("device"), py::arg("current_bytes"), py::arg("peak_bytes"), py::arg("reserved_bytes") = 0,
      "step_memory(step, device, current_bytes, peak_bytes, reserved_bytes=0): the process's memory at the step's end "
      "(device -1: the host's resident set and its high-water mark).");
  m.def(
      "step_memory_events",
      [](int64_t step, int device, int64_t alloc_retries, int64_t ooms) {
        if (device < 0 || device > GPUTRIAGE_MAX_MEMORY_DEVICE)
          throw py::value_error("gputriage.step_memory_events: device is 0.." +
                                std::to_string(GPUTRIAGE_MAX_MEMORY_DEVICE));
        gputriage_step_memory_events(step, device, alloc_retries, ooms);
      },
      py::arg("step"), py::arg("device"), py::arg("alloc_retries"), py::arg("ooms"),
      "step_memory_events(step, device, alloc_retries, ooms): the CUDA allocator's retries and out-of-memory errors so "
      "far.");
  m.attr("ABI_VERSION") = GPUTRIAGE_MARKERS_ABI_VERSION;
  py::dict phases;
  for (int id = GPUTRIAGE_PHASE_DATA; id <= gputriage::kLastPhase; ++id) phases[gputriage::PhaseName(id)] = id;
  m.attr("PHASES") = phases;
}
