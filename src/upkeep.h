/*
 * Upkeep requests: what the read paths and the mode tell the calibrator
 * thread, and the coarse clocks it keeps.  State only, at the bottom of the
 * house, so that the thread (calibrator.c, at the top: it reads the clock
 * through the public read paths) and those who ask it for something never
 * import each other.
 *
 * Writers: `running` only by calibrator.c; `coarse_wanted` set by any
 * reader, cleared by tests; fc_coarse's mono/real by the thread
 * (fc_coarse_publish), and with floor_mono/stopped by fc_coarse_stop_ticking
 * (upkeep.c), which runs on the thread (mode system), in a fork child, in
 * fc_calibrator_stop's caller and where a restarted thread fails to start;
 * `handover` raised by readers before a first tick, closed by that tick (or
 * by the thread's stop), reopened by fc_coarse_resume_ticking when a stopped
 * thread starts again; `direct` by the read paths, by that restart, and by
 * the shim's constructor (preload.c).  docs/architecture.md has the list.
 * Everything here is async-signal-safe.
 */
#ifndef FC_UPKEEP_H
#define FC_UPKEEP_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define FC_UPKEEP_HIDDEN __attribute__((visibility("hidden")))

/* Coarse clocks: written by the calibrator thread about every millisecond.
 * mono == 0 means nobody ticks: readers ask the kernel's coarse clocks.
 * fastclock_inline.h reads mono and real (in that order, first) directly. */
typedef int (*fc_coarse_fn)(clockid_t, struct timespec *);
struct fc_coarse {
    _Atomic int64_t mono __attribute__((aligned(64)));
    _Atomic int64_t real;       /* valid while mono != 0 */
    _Atomic int64_t floor_mono; /* last mono served before the ticker stopped */
    /* No ticker will run (no calibrator thread, or mode system from the
     * start) and none ever served, or the kernel's coarse clock has passed
     * the floor: the kernel's coarse clocks answer straight from the vDSO.
     * Set by the read paths, cleared whenever a floor is set. */
    _Atomic(fc_coarse_fn) direct;
    /* The hand-over to a ticker's first tick (fc_coarse_serve_before_tick):
     * the highest MONOTONIC value served meanwhile, and FC_COARSE_CLOSED
     * once the tick (or the ticker's stop) has taken it.  After `direct`,
     * whose place fastclock_inline.h's block fixes. */
    _Atomic int64_t handover;
    /* Set once the ticker has stopped and left its floor (the thread may
     * still run, in mode system): the read paths may route to the kernel. */
    _Atomic int stopped;
};
FC_UPKEEP_HIDDEN extern struct fc_coarse fc_coarse;

/* The hand-over's note is closed: its sign bit (MONOTONIC is never
 * negative, and 0 means nobody ticks). */
#define FC_COARSE_CLOSED INT64_MIN

/* The highest coarse MONOTONIC served other than from fc_coarse.mono, which
 * the kernel's coarse clock is held at wherever it answers: the last tick
 * before the thread stopped, or a value served before a first tick that
 * never came (the mode left tsc first).  0: none. */
static inline int64_t fc_coarse_floor(void)
{
    int64_t f = atomic_load_explicit(&fc_coarse.floor_mono, memory_order_relaxed);
    int64_t n = atomic_load_explicit(&fc_coarse.handover, memory_order_relaxed) & INT64_MAX;
    return n > f ? n : f;
}

/* 1 while a calibrator thread serves this process. */
FC_UPKEEP_HIDDEN int fc_upkeep_running(void);
FC_UPKEEP_HIDDEN void fc_upkeep_set_running(int running); /* calibrator.c only */
/* Wake the thread if it waits (a no-op without one). */
FC_UPKEEP_HIDDEN void fc_upkeep_wake(void);
/* The thread: the wake-up count, and sleep until it moves past `seen` or
 * timeout_ns passes (-1: no timeout). */
FC_UPKEEP_HIDDEN int fc_upkeep_wake_count(void);
FC_UPKEEP_HIDDEN void fc_upkeep_wait(int seen, int64_t timeout_ns);

/* The ticker: publish one tick.  Never below the tick before it, nor, on
 * the first tick after nobody ticked, below any value a reader served
 * meanwhile through fc_coarse_serve_before_tick. */
FC_UPKEEP_HIDDEN void fc_coarse_publish(int64_t mono, int64_t real);
/* A reader while a ticker is about to tick (mode tsc or tsc-percpu, the
 * thread running, nothing published yet): `fine` is a fine MONOTONIC value
 * it just read; returns what to serve -- no less than anything served
 * before, and never above what the first tick will publish. */
FC_UPKEEP_HIDDEN int64_t fc_coarse_serve_before_tick(int64_t fine);
/* The ticker stops: readers fall back to the kernel's coarse clocks,
 * clamped at the last value served from memory (keep_floor), or unclamped
 * (a new timeline: a fork into a new time namespace). */
FC_UPKEEP_HIDDEN void fc_coarse_stop_ticking(int keep_floor);

/* The ticker starts again after a stop (calibrator.c, a JNI reload): the
 * hand-over reopens, at no less than anything served meanwhile. */
FC_UPKEEP_HIDDEN void fc_coarse_resume_ticking(void);

/* A reader uses the coarse clocks: ask the thread to tick them. */
FC_UPKEEP_HIDDEN void fc_coarse_request(void);
FC_UPKEEP_HIDDEN int fc_coarse_wanted(void);

/* Tests: a stalled calibrator. */
FC_UPKEEP_HIDDEN void fc_upkeep_pause(int paused);
FC_UPKEEP_HIDDEN int fc_upkeep_paused(void);
FC_UPKEEP_HIDDEN void fc_upkeep_reset_for_tests(void);

#endif
