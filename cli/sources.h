/* Every way of reading the time that `fastclock bench` and `fastclock
 * doctor` measure, and how they measure it.
 *
 * Each source has its own noinline loop with the call inlined, because a
 * call through a function pointer per read would cost as much as a coarse
 * clock.  Costs come from batches of about a millisecond, interleaved
 * round-robin across sources so that machine noise (other tenants, the
 * other engineers' builds) hits every source alike; the median batch is the
 * figure, min and max show the spread. */
#ifndef FASTCLOCK_CLI_SOURCES_H
#define FASTCLOCK_CLI_SOURCES_H

#include <stdint.h>

enum src_group { GROUP_COUNTER, GROUP_FASTCLOCK, GROUP_LIBC, GROUP_SYSCALL };
/* Unit of a source's readings, for granularity. */
enum src_unit { UNIT_NS, UNIT_TICKS, UNIT_US, UNIT_S };

typedef uint64_t (*src_loop_fn)(uint64_t n, long arg);
typedef int64_t (*src_read_fn)(long arg);

struct source {
    char key[64];           /* stable machine name: "clock_gettime(CLOCK_MONOTONIC)" */
    const char *note;       /* one-line explanation for reports */
    enum src_group group;
    src_loop_fn loop;
    src_read_fn read;       /* one reading, for granularity */
    enum src_unit unit;
    long arg;               /* clock id, where there is one */
    int usable;             /* the call works here */
    int err;                /* errno when not usable */

    /* Cost: filled by src_measure. */
    uint64_t n;             /* calls per batch */
    double *samples;        /* ns per call, one per batch */
    int count, cap;
    double median, min, max;

    /* Granularity: filled by src_step. */
    double step_native;     /* in `unit`; NaN if no step seen */
    double step_ns;
    int step_changes;
};

const char *src_group_name(enum src_group g);
const char *src_unit_name(enum src_unit u);

/* Clock ids by name, in the order reports list them. */
struct clock_name {
    const char *name;
    int id;
};
extern const struct clock_name src_clocks[];
extern const int src_nclocks;

/* Constructors: fill *s and probe whether the call works. */
/* Counters: 0 the bare read, 1 and 2 the two fenced reads fastclock chooses
 * between (x86: rdtscp, lfence;rdtsc; arm64: cntvctss_el0, isb;cntvct_el0),
 * as its ordered reads execute them; 1 is unusable where the CPU lacks it. */
void src_counter(struct source *s, int which);
void src_fastclock(struct source *s, int which); /* see FC_SRC_* */
void src_clock_gettime(struct source *s, int clock_index);
void src_syscall_clock_gettime(struct source *s, int clock_index);
void src_gettimeofday(struct source *s, int via_syscall);
void src_time(struct source *s, int via_syscall);   /* via_syscall: 0 on arm64 (no time syscall) */

enum {
    FC_SRC_MONO, FC_SRC_MONO_UNORDERED, FC_SRC_REAL, FC_SRC_REAL_UNORDERED,
    FC_SRC_MONO_COARSE, FC_SRC_REAL_COARSE, FC_SRC_TICKS, FC_SRC_GETTIME,
    FC_SRC_MONO_INLINE, FC_SRC_MONO_UNORDERED_INLINE, FC_SRC_MONO_COARSE_INLINE,
    FC_SRC_GETTIME_REAL, FC_SRC_GETTIMEOFDAY, FC_SRC_COUNT
};

/* Measure ns per call of n sources: each batch lasts about batch_ns,
 * batches are interleaved round-robin for about `seconds` in total (at
 * least min_rounds rounds).  progress(done, total, ctx) is called after
 * each round if not NULL.  Unusable sources are skipped. */
typedef void (*src_progress_fn)(const char *phase, int done, int total, void *ctx);
void src_measure(struct source *s, int n, double seconds, double batch_ns, int min_rounds,
                 src_progress_fn progress, void *ctx);
void src_free(struct source *s, int n);

/* Smallest non-zero step between consecutive readings, watched for
 * window_ns, longer (up to 6 windows) until 8 changes were seen, except for
 * UNIT_S clocks; stops early after 64 changes.  ticks_hz converts UNIT_TICKS. */
void src_step(struct source *s, double window_ns, double ticks_hz);

/* Thread scaling: `threads` threads, pinned round-robin to cpus[], each
 * calling the source for run_ns of wall time.
 *
 * Costs are taken on each thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so
 * other processes competing for the CPUs do not show up as a slower clock,
 * while a source that serialises (an HPET read stalls the CPU; a lock
 * spins) still does.  ns_per_call is the mean over threads;
 * calls_per_s = min(threads, ncpus) * 1e9 / ns_per_call, what the machine
 * sustains with its CPUs to itself; wall_calls_per_s is what this run got. */
struct scale_sample {
    double calls_per_s, ns_per_call, wall_calls_per_s;
};
/* src_scale's answer where a worker never got its CPU within 2 s (a
 * real-time task busy there): the workers are left behind, unmeasured. */
#define SRC_SCALE_STUCK (-2)
int src_scale(struct source *s, int threads, const int *cpus, int ncpus, double run_ns, struct scale_sample *out);

/* CPUs this process may run on (sched_getaffinity), at most max; returns the count. */
int src_allowed_cpus(int *cpus, int max);

#endif
