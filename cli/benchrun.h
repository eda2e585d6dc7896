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
    char fc_mode[32], fc_calibrator[32], fc_reason[320];
};

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
