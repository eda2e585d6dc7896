/* Calibration: measuring the kernel's clocks against the counter and
 * publishing the lines readers evaluate. */
#ifndef FC_CALIBRATION_H
#define FC_CALIBRATION_H

#include <stdint.h>
#include "internal.h"

/* One minimum-latency sample of the kernel's clocks. */
struct fc_sample {
    uint64_t t;        /* counter at the middle of the tightest bracket */
    uint64_t t0;       /* counter at its start: the kernel read came no earlier */
    uint64_t width;    /* bracket width in ticks */
    int64_t mono;      /* CLOCK_MONOTONIC, ns */
    int offsets_ok;
    int tai_ok;
    int64_t real_off;  /* REALTIME - MONOTONIC */
    int64_t boot_off;  /* BOOTTIME - MONOTONIC */
    int64_t tai_off;   /* TAI - REALTIME */
};

enum fc_sample_result { FC_SAMPLE_OK = 0, FC_SAMPLE_NOISY = -1, FC_SAMPLE_BACKWARDS = -2, FC_SAMPLE_ERROR = -3 };
int fc_cal_sample(struct fc_sample *s, int tries);

/* The calibration lock: one writer at a time, never waited for by readers. */
int fc_cal_trylock(void);
void fc_cal_unlock(void);

/* With the lock held: first line after a mode decision.  Returns 0, or -1
 * with a reason written to why. */
int fc_cal_start(double seed_hz, const char *seed_source, char *why, size_t why_size);
/* With the lock held: take a sample and publish a corrected line.  Returns
 * 0 on success, -1 if no line was published (the current one stays). */
int fc_cal_recalibrate(void);
/* With the lock held: leave mode tsc for good, keeping MONOTONIC from going back. */
void fc_cal_fail_to_system(const char *reason);
/* Publish a line that routes every read to the kernel (mode system). */
void fc_cal_publish_system(int64_t floor_ns);

/* Bookkeeping for fastclock_status (read without the lock; approximate). */
struct fc_cal_stats {
    uint64_t calibrations;
    int64_t last_err_ns, max_err_ns, last_width_ns, interval_ns;
    uint64_t realtime_steps, rate_resets;
    double rate_ns_per_tick;
};
void fc_cal_stats(struct fc_cal_stats *out);
int64_t fc_cal_ticks_to_ns(int64_t ticks);

/* The background calibrator (calibration.c). */
void fc_calibrator_start(void);     /* from a normal (non-signal) context only */
int fc_calibrator_running(void);
void fc_calibrator_after_fork_child(void);
void fc_calibrator_wake(void);
void fc_calibrator_stop(void);      /* tests: joins the thread */
/* Set when a reader wants the coarse clocks served from memory. */
void fc_coarse_request(void);
/* Stop serving coarse clocks from memory (readers ask the kernel, clamped). */
void fc_coarse_deactivate(void);
/* Tests: forget all calibration state. */
void fc_cal_reset_for_tests(void);

/* Limits (tests may shrink max_interval). */
FC_HIDDEN extern int64_t fc_cal_max_interval_ns;

#endif
