/* What `fastclock bench` measures, and the results: per-call cost of every
 * source, thread scaling of a representative subset, and granularity. */
#ifndef FASTCLOCK_CLI_BENCHRUN_H
#define FASTCLOCK_CLI_BENCHRUN_H

#include <stddef.h>

#include "sources.h"

#define BENCH_MAX_SOURCES 40
#define BENCH_MAX_SCALE 12
#define BENCH_MAX_THREADS 64

struct bench_config {
    double seconds;                 /* budget for cost + scaling (granularity adds ~1.5 s) */
    int threads[BENCH_MAX_THREADS]; /* thread counts, ascending */
    int nthreads;
    int progress;                   /* progress line on stderr */
};

/* fastclock_status() at one moment: what a fastclock row measured.  The
 * bench takes it before the cost phase, after it, and at the end; a change
 * between two (a mode change, reads routed to the kernel, fallback reads)
 * means the fastclock figures mix two read paths. */
struct bench_fc_state {
    int known;                 /* taken */
    char mode[32], calibrator[32], reason[512];
    char counter[96];          /* status().counter: the instruction, or "clock_gettime ..." */
    char real_source[16];      /* "line" or "vdso" */
    double real_line_ratio;    /* the kernel's REALTIME over the line's, as timed (0: not timed) */
    uint64_t fallback_reads;   /* reads the kernel answered while in mode tsc */
    int forced;                /* FASTCLOCK_MODE chose the mode */
};

/* Takes fastclock_status() now. */
void bench_take_state(struct bench_fc_state *x);
/* fastclock_ticks' unit in ns per tick, from fastclock_ticks_to_ns: the
 * unit is fixed when the mode is decided (counter ticks where that was tsc,
 * kept after a later fall to tsc-percpu or system; ns otherwise), so the
 * mode now cannot tell it.  NaN if unknown. */
double bench_ticks_ns_per_tick(void);

/* Who answers fastclock's fine reads, from status().counter: "counter" or
 * "kernel" (clock_gettime), for the ordered reads (fastclock_mono_ns) and
 * the unordered ones (fastclock_mono_ns_unordered). */
const char *bench_ordered_reads(const char *counter);
const char *bench_unordered_reads(const char *counter);
/* The counter source (its key in the cost table) that is the floor of
 * fastclock's ordered read, from status().counter: "rdtscp" or
 * "lfence;rdtsc" (arm64: "cntvctss_el0" or "isb;cntvct_el0"); NULL where
 * the ordered reads are the kernel's or the counter names no fenced read. */
const char *bench_ordered_floor_key(const char *counter);
/* Describes what changed from a to b ("mode tsc -> system; ..."), empty if
 * nothing did; returns the number of changes.  reads: fastclock reads made
 * in between, for the fallback reads' share (0: unknown). */
int bench_fc_changes(const struct bench_fc_state *a, const struct bench_fc_state *b, double reads, char *out,
                     size_t size);

struct bench_point {
    int ok;
    double calls_per_s, ns_per_call;  /* medians over rounds (see src_scale) */
    double min_calls_per_s, max_calls_per_s;
    double wall_calls_per_s;          /* median throughput this run actually got */
};

struct bench_result {
    struct source src[BENCH_MAX_SOURCES];
    int nsrc;
    int rdtsc, cg_mono;             /* indices of the two reference sources, -1 if unusable */
    int ordered_floor;              /* index of the fenced counter read fastclock's ordered reads use
                                       (status counter), -1 if none here or unusable */
    int scale_src[BENCH_MAX_SCALE]; /* indices into src[] */
    int nscale;
    int threads[BENCH_MAX_THREADS];
    int nthreads;
    struct bench_point point[BENCH_MAX_SCALE][BENCH_MAX_THREADS];
    int cost_rounds;
    double batch_ns;
    int scale_rounds;
    double scale_run_ns;
    int cpus;                       /* CPUs this process may use */
    double counter_hz;              /* measured over the run */
    double elapsed_s;

    /* The machine, to print beside the numbers. */
    char cpu[128], arch[32], kernel[128], hypervisor[48], clocksource[64], available[256];
    char clocksource_end[64];       /* read again at the end: someone may switch it meanwhile */
    char fc_mode[32], fc_calibrator[32], fc_reason[512]; /* as the cost phase began (fc_start) */

    /* fastclock's state before the cost phase, after it, and at the end
     * (after thread scaling and granularity), and what changed between them
     * ("" where nothing did). */
    struct bench_fc_state fc_start, fc_after_cost, fc_end;
    char fc_changed_cost[512], fc_changed_later[512];
    double ticks_ns_per_tick;       /* fastclock_ticks' unit (bench_ticks_ns_per_tick) */
};

/* The CLI links the library statically (cli/CMakeLists.txt): its fastclock_*
 * rows are direct calls, while libc's clock_gettime goes through the PLT.
 * fastclock-bench-core (bench/core_bench.c) links libfastclock.so. */
#define BENCH_LINKAGE "static"

/* Parses "1,2,4" or "1-4" or "1,8-10" into ascending unique counts in
 * 1..1024.  Returns the count, or -1 with a message. */
int bench_parse_threads(const char *s, int *out, int max, char *err, size_t esize);

/* Runs everything; r->src etc. must be freed with bench_free. */
void bench_run(const struct bench_config *cfg, struct bench_result *r);
void bench_free(struct bench_result *r);

/* Ratio of a source's median to a reference's, NaN if either is unknown. */
double bench_ratio(const struct bench_result *r, int i, int ref);
/* calls/s at the largest thread count over calls/s with one thread. */
double bench_scaling(const struct bench_result *r, int k);

#endif
