/* gputriage step markers: a stable C ABI for timing training steps and their
 * phases from inside the training loop. Markers go into a shared-memory ring
 * that `gputriage record` creates and reads; the ring is passed to the job (and
 * its children) through the environment, so a process started without a
 * recorder pays only the check that no ring is attached.
 *
 * Thread- and process-safe: any thread of any process of the job may write.
 * Times are taken when the call is made and placed on the wall clock the
 * recorder's GPU samples use (the writer reads the invariant TSC where there is
 * one, else CLOCK_REALTIME).
 */
#ifndef GPUTRIAGE_MARKERS_H_
#define GPUTRIAGE_MARKERS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUTRIAGE_MARKERS_ABI_VERSION 1

/* Named phases of a step (1-7, 11) and of the job around its steps (6, 8-10).
 * A checkpoint inside a step is part of that step; outside steps it, and the
 * evaluation, compilation and restore phases wherever they are, are the job's
 * own time in the goodput ledger, not the next step's. */
typedef enum gputriage_phase {
  GPUTRIAGE_PHASE_DATA = 1,          /* waiting for the next batch (DataLoader, I/O, preprocessing) */
  GPUTRIAGE_PHASE_FORWARD = 2,
  GPUTRIAGE_PHASE_BACKWARD = 3,
  GPUTRIAGE_PHASE_OPTIMIZER = 4,
  GPUTRIAGE_PHASE_COMMUNICATION = 5, /* all-reduce and other collectives outside backward */
  GPUTRIAGE_PHASE_CHECKPOINT = 6,    /* saving a checkpoint */
  GPUTRIAGE_PHASE_OTHER = 7,
  GPUTRIAGE_PHASE_EVAL = 8,          /* evaluation / validation */
  GPUTRIAGE_PHASE_COMPILE = 9,       /* compilation and warm-up (torch.compile's first calls, autotuning) */
  GPUTRIAGE_PHASE_RESTORE = 10,      /* loading a checkpoint to resume */
  GPUTRIAGE_PHASE_COPY = 11          /* copying the step's inputs to the device (host-to-device) */
} gputriage_phase;

/* 1 when a recorder's ring is attached to this process, else 0. Attaches on
 * the first call (every other call attaches too, so calling this is optional). */
int gputriage_markers_enabled(void);

/* A training step begins / ends. `samples`, `tokens` (0 when unknown) and
 * `flops` (model FLOPs of the step, 0 when unknown; for MFU) are per step. */
void gputriage_step_begin(int64_t step);
void gputriage_step_end(int64_t step, int64_t samples, int64_t tokens, double flops);

/* The GPU time of step `step` of this process, in ns, measured on the device
 * (e.g. between two CUDA events recorded at the step's begin and end, read once
 * they completed, so no step waits for the GPU). May come steps later. */
void gputriage_step_device_time(int64_t step, int64_t device_ns);

/* The GPU time of phase `phase` of step `step` of this process, in ns, measured
 * on the device as gputriage_step_device_time is (events at the phase's begin
 * and end). Added up over the step's phases of that id. May come steps later. */
void gputriage_phase_device_time(int64_t step, gputriage_phase phase, int64_t device_ns);

/* A named phase begins / ends on the calling thread. */
void gputriage_phase_begin(gputriage_phase phase);
void gputriage_phase_end(gputriage_phase phase);

/* The marker clock now: what a marker made at this moment would carry (raw TSC
 * ticks or ns, as the ring says; only for gputriage_phase_switch_at). */
int64_t gputriage_markers_clock(void);

/* On the calling thread, phase `from` ends and phase `to` begins at `t`, an
 * earlier gputriage_markers_clock() reading (a later one is taken as now): for a
 * phase whose start is known only once it is over -- backward waits for DDP's
 * gradient all-reduce from the moment autograd's thread hands over the last
 * bucket, which the training thread learns when backward returns. */
void gputriage_phase_switch_at(gputriage_phase from, gputriage_phase to, int64_t t);

/* Step `step` begins at `t`, an earlier gputriage_markers_clock() reading (a
 * later one is taken as now): for a step whose start is known only once the
 * loop shows it is training again -- a loop without a DataLoader, stepped by its
 * optimizer, whose next step began where the last optimizer step returned. */
void gputriage_step_begin_at(int64_t step, int64_t t);

/* The memory of this process at the end of step `step`, in bytes. On CUDA device
 * `device` (0, 1, ...): what its caching allocator holds allocated, the peak of
 * that since the process started (or since the job last reset it), and what the
 * allocator has reserved from the driver. On the host (`device` =
 * GPUTRIAGE_HOST_MEMORY): the resident set, its high-water mark, and 0. */
#define GPUTRIAGE_HOST_MEMORY (-1)
#define GPUTRIAGE_MAX_MEMORY_DEVICE 1023
void gputriage_step_memory(int64_t step, int32_t device, int64_t current_bytes, int64_t peak_bytes,
                           int64_t reserved_bytes);

/* The allocator's events on CUDA device `device` by the end of step `step`,
 * counted since the process started: retries (an allocation failed, the cache
 * was freed and the allocation retried) and out-of-memory errors raised. */
void gputriage_step_memory_events(int64_t step, int32_t device, int64_t alloc_retries, int64_t ooms);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* GPUTRIAGE_MARKERS_H_ */
