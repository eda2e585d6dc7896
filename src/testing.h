/* Test seam: replace the counter, the kernel clock, the CPU probe and the
 * sysfs root, then let the library decide its mode again.  Linked from
 * the build tree's internal static library (fastclock_internal) only:
 * never in an installed library. */
#ifndef FC_TESTING_H
#define FC_TESTING_H

#include "fastclock.h"
#include "seam.h"
#include "cpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Forget everything (stops the calibrator thread) and install `seam`
 * (NULL: the real machine).  No other thread may read the clock meanwhile. */
void fc_test_reset(const struct fc_seam *seam);
/* Start the background calibrator (the constructor normally does). */
void fc_test_start_calibrator(void);
/* Stop it, as JNI_OnUnload does (a redeploy); start it again with the above. */
void fc_test_stop_calibrator(void);
/* Current line's error bound and spans, for assertions. */
struct fc_test_line {
    uint64_t base_tsc, soft_span, base_frac, fast_span;
    int64_t mult, base_ns, error_bound_ns, real_offset, boot_offset, floor_ns;
    uint64_t epoch;
    long tick_us;            /* the adjtimex tick it was built for (0: not known) */
    int64_t checked_mono_ns; /* its last look at the kernel (sync.c) */
};
void fc_test_current_line(struct fc_test_line *out);
/* tsc-percpu: CPU cpu's current line (0), with error_bound_ns its bound at
 * kernel MONOTONIC mono_now (fc_meta_bound); -1 where that CPU has none. */
int fc_test_cpu_line(int cpu, int64_t mono_now, struct fc_test_line *out);
/* tsc-percpu: CPU cpu's calibration, as its pinned calibrator thread makes
 * it (when due); the test runs "on" that CPU. */
void fc_test_percpu_maintain(int cpu);
/* That CPU's line renewed now, due or not (as a forced maintenance). */
void fc_test_percpu_recalibrate(int cpu);
/* The line's CLOCK_MONOTONIC value at counter value t (exact fixed point). */
int64_t fc_test_line_eval(const struct fc_test_line *l, uint64_t t);
/* The same from the counter's halves, as the x86 read path computes it
 * (line.h fc_line_view_mono_halves), for t - base_tsc < the line's span. */
int64_t fc_test_line_eval_halves(const struct fc_test_line *l, uint64_t t);
/* Recalibrate now, as the thread or a due reader would.  0 if a line was published. */
int fc_test_recalibrate(void);
/* A stalled calibrator thread (1) and its recovery (0). */
void fc_test_pause_calibrator(int paused);
/* One tick of the calibrator's coarse clocks, made on this thread (with
 * the thread paused: its ticks are the test's). */
void fc_test_coarse_tick(void);
/* What the calibrator does when its start-up warp check fails. */
void fc_test_switch_to_percpu(const char *why);
/* The calibrator thread's look at the kernel's clocksources, run here:
 * fc_mode_recheck_kernel_trust. */
int fc_test_recheck_kernel_trust(void);
/* After such a switch: the floor no per-CPU read goes below, raised to
 * floor_ns -- a global line that led the kernel by that much. */
void fc_test_raise_percpu_floor(int64_t floor_ns);
/* Take (1: waits for it) or release (0) the global line's writer lock, as
 * a calibration in progress on this thread holds it. */
void fc_test_hold_writer_lock(int hold);
/* The highest MONOTONIC value a fallback read noted for the global line's
 * writer to lift its next line above (calibration.c's handshake). */
int64_t fc_test_fallback_noted(void);
/* What a fail-safe does: leave the counter for the kernel's clocks. */
void fc_test_fail_to_system(const char *why);
/* Where the fine reads go straight to a kernel clock (NULL: not routed):
 * every fine read, the ordered ones, the wall clocks ordered, unordered and
 * gettimeofday (wall.h). */
struct fc_test_routes {
    const void *kernel_direct, *kernel_ordered, *wall, *wall_unordered, *wall_tv;
    const void *percpu_lines; /* what kernel_direct and kernel_ordered hold where tsc-percpu's lines answer */
};
void fc_test_get_routes(struct fc_test_routes *out);
/* How many pairs of CPUs the lazy warp check compared on MONOTONIC_RAW. */
uint64_t fc_test_warp_raw_compares(void);
/* The rate every CPU's first line starts from in tsc-percpu (ns per tick). */
double fc_test_percpu_seed_rate(void);
/* tsc-percpu with no CPU calibrated: when the calibrator tours next, its
 * last tour begun at last_tour (percpu.h). */
int64_t fc_test_percpu_idle_until(int64_t last_tour);
/* This thread's cached second for REALTIME (clock.h fc_sec_cache), set as
 * given: what a signal handler's split can leave in it mid-update. */
void fc_test_set_real_second_cache(int64_t sec, int64_t sec_ns);

#ifdef __cplusplus
}
#endif
#endif
