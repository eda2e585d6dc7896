/* tsc-percpu mode: one calibrated line per CPU, selected by rdtscp's TSC_AUX. */
#ifndef FC_PERCPU_H
#define FC_PERCPU_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* Allocates the per-CPU lines and checks that TSC_AUX names the CPU.
 * Async-signal-safe (mmap, getcpu).  0, or -1 with the reason in why. */
int fc_percpu_setup(char *why, size_t why_size);
/* The read path of mode tsc-percpu (called from the slow path). */
int64_t fc_percpu_read(enum fc_kind kind);
/* Calibrator thread, pinned to `cpu`: start or refresh that CPU's line. */
void fc_percpu_maintain_cpu(int cpu, int force);
/* Before mode tsc-percpu begins: no per-CPU read returns less (the global
 * line's ceiling). */
void fc_percpu_set_floor(int64_t floor_ns);
/* ns per tick measured on one CPU at setup (0 before). */
double fc_percpu_seed_rate(void);
/* Shortest interval any calibrated CPU wants now. */
int64_t fc_percpu_interval_ns(void);
void fc_percpu_after_fork_child(void);

struct fc_percpu_stats {
    int cpus;              /* slots */
    int calibrated;        /* CPUs with a usable line */
    int given_up;          /* CPUs read through the kernel after 15 s of failed calibration */
    int64_t bound_ns;      /* the mode's error bound now: the two largest CPU bounds
                              added (two CPUs' lines may disagree by that much) */
    int64_t max_age_ns;    /* the stalest calibrated CPU's time since its calibration */
    double mean_hz;        /* average counter frequency */
    int64_t max_warp_cycles; /* start-up warp check, -1 if it did not run */
};
void fc_percpu_stats(struct fc_percpu_stats *out);
void fc_percpu_reset_for_tests(void);

#endif
