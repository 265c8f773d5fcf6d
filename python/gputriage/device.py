"""Device-side step time: each step timed on the GPU by two CUDA events, read
once they have completed, so no step waits for the GPU (a host timer around
asynchronous work measures launches, not compute). The step's forward, backward,
optimizer and copy phases (marked by the job or zero-code mode) are timed the
same way, each between events recorded at its begin and end.

    gputriage.time_device()      # every step from here on, on the current CUDA stream

The recorder then tells a data wait that left the GPU idle from one the GPU
spent on queued work.
"""
import atexit
import collections
import warnings

from gputriage import _markers


class CudaStepTimer:
    """Records an event at each step's begin and end on the current stream and
    reports ``end - begin`` when the end event has completed, polled at later
    steps (never synchronising), and the rest at exit.

    ``event_factory`` makes an event with record(), query(), elapsed_time(other)
    in ms and synchronize(): ``torch.cuda.Event(enable_timing=True)`` by default."""

    def __init__(self, event_factory=None, max_pending=1024):
        if event_factory is None:
            import torch
            if not torch.cuda.is_available():
                raise RuntimeError("gputriage.time_device: no CUDA device (torch.cuda.is_available() is False)")
            event_factory = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
        self._new_event = event_factory
        self._free = []
        self._open = {}
        self._current = None  # the step open now: its phases are timed
        self._phases = {}     # phase id -> the event at its begin, in the current step
        self._pending = collections.deque()
        self._max_pending = max_pending
        self.dropped = 0  # steps and phases whose events were given up on (more than max_pending outstanding)

    def _event(self):
        event = self._free.pop() if self._free else self._new_event()
        event.record()
        return event

    def begin(self, step):
        self._open[step] = self._event()
        self._current = step
        self._phases.clear()
        self._poll()

    def end(self, step):
        start = self._open.pop(step, None)
        if self._current == step:
            self._current = None
            self._phases.clear()  # a phase still open at the step's end is not timed
        if start is None:
            return
        self._queue(step, None, start, self._event())
        self._poll()

    def phase_begin(self, phase):
        """A device-timed phase (forward, backward, optimizer, copy) begins in the open step."""
        if self._current is not None and phase not in self._phases:
            self._phases[phase] = self._event()

    def phase_end(self, phase):
        start = self._phases.pop(phase, None)
        if start is not None:
            self._queue(self._current, phase, start, self._event())

    def _queue(self, step, phase, start, end):
        self._pending.append((step, phase, start, end))
        if len(self._pending) > self._max_pending:  # a GPU far behind: forget the oldest rather than wait
            self._pending.popleft()
            self.dropped += 1

    @staticmethod
    def _report(step, phase, start, end):
        ns = int(start.elapsed_time(end) * 1e6)
        if phase is None:
            _markers.step_device_time(step, ns)
        else:
            _markers.phase_device_time(step, phase, ns)

    def _poll(self):
        pending, report = self._pending, self._report
        while pending and pending[0][3].query():
            step, phase, start, end = pending.popleft()
            report(step, phase, start, end)
            self._free += (start, end)

    def flush(self):
        """Reports every outstanding step and phase, waiting for the GPU (at exit)."""
        while self._pending:
            step, phase, start, end = self._pending.popleft()
            end.synchronize()
            self._report(step, phase, start, end)


_timer = None
_warned_no_device = False


def time_device(enable=True, timer=None):
    """Times every step on the GPU from now on (``enable=False`` stops it).
    Without CUDA (or torch) it warns once and does nothing, returning None.
    ``timer`` replaces the CUDA-event timer (an object with begin(step),
    end(step) and flush())."""
    global _timer
    if _timer is not None:
        _timer.flush()
        _markers._set_device_timer(None)
        _timer = None
    if enable:
        if timer is None:
            try:
                timer = CudaStepTimer()
            except (ImportError, RuntimeError) as e:
                # A script written for a GPU machine, run on a laptop or in CI: it
                # must keep training. Say so once; host-side step times still count.
                global _warned_no_device
                if not _warned_no_device:
                    _warned_no_device = True
                    warnings.warn(f"gputriage.time_device() does nothing here: {e}", RuntimeWarning, stacklevel=2)
                return None
        _timer = timer
        _markers._set_device_timer(_timer)
    return _timer


@atexit.register
def _flush_at_exit():
    if _timer is not None:
        _timer.flush()
