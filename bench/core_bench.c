/*
 * fastclock-bench-core: ns per call of every way to read the time, side by
 * side, in one run.  Each source has its own loop with the call inlined (a
 * call through a function pointer would cost as much as a coarse clock), and
 * batches of all sources are interleaved round-robin so machine noise hits
 * them alike; the table shows the median batch, and the ratios come from
 * medians of the same run.  Linked with libfastclock.so: fastclock_* are
 * called through its PLT, as a linked program calls them (the `fastclock
 * bench` command links the library statically: direct calls).
 *
 *   fastclock-bench-core [--seconds S]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "fastclock.h"
#include "fastclock_inline.h"

#if defined(__x86_64__)
/* The halves as register-wide outputs, as the library reads them
 * (src/counter.h fc_counter_unordered): rdtsc clears the upper halves of
 * rax and rdx, and saying so spares the zero-extending movs that 32-bit
 * outputs cost (~0.1 ns), which would flatter every ratio to this floor. */
static inline uint64_t rdtsc(void)
{
    unsigned long lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}
/* The ordered reads' floor: the two fenced forms (the library picks the
 * cheaper one that orders on this CPU, status's counter says which). */
static inline uint64_t lfence_rdtsc(void)
{
    unsigned long lo, hi;
    __asm__ __volatile__("lfence; rdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return ((uint64_t)hi << 32) | lo;
}
static inline uint64_t rdtscp(void)
{
    unsigned long lo, hi, aux;
    __asm__ __volatile__("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
    return ((uint64_t)hi << 32) | lo;
}
#define FENCED_A_NAME "lfence;rdtsc"
#define FENCED_B_NAME "rdtscp"
#else
static inline uint64_t rdtsc(void)
{
    uint64_t v;
    __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
    return v;
}
/* The ordered read's floor on arm64: isb, then the counter. */
static inline uint64_t lfence_rdtsc(void)
{
    uint64_t v;
    __asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v)::"memory");
    return v;
}
static inline uint64_t rdtscp(void) { return lfence_rdtsc(); }
#define FENCED_A_NAME "isb;mrs cntvct_el0"
#define FENCED_B_NAME "isb;mrs cntvct_el0 (again)"
#endif

static inline int64_t ts_ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}
static inline int64_t tv_us(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}
static inline int64_t sys_ns(void)
{
    struct timespec t;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t);
    return t.tv_nsec;
}

#define LOOP(fname, expr)                                \
    static __attribute__((noinline)) uint64_t fname(uint64_t n) \
    {                                                    \
        uint64_t acc = 0;                                \
        for (uint64_t i = 0; i < n; i++)                 \
            acc += (uint64_t)(expr);                     \
        return acc;                                      \
    }

LOOP(l_rdtsc, rdtsc())
LOOP(l_fenced_a, lfence_rdtsc())
LOOP(l_fenced_b, rdtscp())
LOOP(l_mono, fastclock_mono_ns())
LOOP(l_real, fastclock_real_ns())
LOOP(l_mono_u, fastclock_mono_ns_unordered())
LOOP(l_real_u, fastclock_real_ns_unordered())
LOOP(l_mono_i, fastclock_mono_ns_inline())
LOOP(l_mono_ui, fastclock_mono_ns_unordered_inline())
LOOP(l_mono_c, fastclock_mono_coarse_ns())
LOOP(l_real_c, fastclock_real_coarse_ns())
LOOP(l_mono_ci, fastclock_mono_coarse_ns_inline())
LOOP(l_real_ci, fastclock_real_coarse_ns_inline())
LOOP(l_ticks, fastclock_ticks())
LOOP(l_cg_mono, ts_ns(CLOCK_MONOTONIC))
LOOP(l_cg_real, ts_ns(CLOCK_REALTIME))
LOOP(l_cg_mono_c, ts_ns(CLOCK_MONOTONIC_COARSE))
LOOP(l_cg_real_c, ts_ns(CLOCK_REALTIME_COARSE))
LOOP(l_gtod, tv_us())
LOOP(l_sys, sys_ns())

struct source {
    const char *name;
    uint64_t (*loop)(uint64_t);
    uint64_t n;          /* calls per batch */
    double *samples;     /* ns per call, one per batch */
    int count;
    double median, min, max;
};

static struct source sources[] = {
    {"rdtsc (bare)", l_rdtsc, 0, 0, 0, 0, 0, 0},
    {FENCED_A_NAME, l_fenced_a, 0, 0, 0, 0, 0, 0},
    {FENCED_B_NAME, l_fenced_b, 0, 0, 0, 0, 0, 0},
    {"fastclock_mono_ns", l_mono, 0, 0, 0, 0, 0, 0},
    {"fastclock_real_ns", l_real, 0, 0, 0, 0, 0, 0},
    {"fastclock_mono_ns_unordered", l_mono_u, 0, 0, 0, 0, 0, 0},
    {"fastclock_real_ns_unordered", l_real_u, 0, 0, 0, 0, 0, 0},
    {"fastclock_mono_ns_inline", l_mono_i, 0, 0, 0, 0, 0, 0},
    {"fastclock_mono_ns_unordered_inline", l_mono_ui, 0, 0, 0, 0, 0, 0},
    {"fastclock_mono_coarse_ns", l_mono_c, 0, 0, 0, 0, 0, 0},
    {"fastclock_real_coarse_ns", l_real_c, 0, 0, 0, 0, 0, 0},
    {"fastclock_mono_coarse_ns_inline", l_mono_ci, 0, 0, 0, 0, 0, 0},
    {"fastclock_real_coarse_ns_inline", l_real_ci, 0, 0, 0, 0, 0, 0},
    {"fastclock_ticks", l_ticks, 0, 0, 0, 0, 0, 0},
    {"clock_gettime(MONOTONIC)", l_cg_mono, 0, 0, 0, 0, 0, 0},
    {"clock_gettime(REALTIME)", l_cg_real, 0, 0, 0, 0, 0, 0},
    {"clock_gettime(MONOTONIC_COARSE)", l_cg_mono_c, 0, 0, 0, 0, 0, 0},
    {"clock_gettime(REALTIME_COARSE)", l_cg_real_c, 0, 0, 0, 0, 0, 0},
    {"gettimeofday", l_gtod, 0, 0, 0, 0, 0, 0},
    {"syscall(SYS_clock_gettime)", l_sys, 0, 0, 0, 0, 0, 0},
};
#define NSRC (sizeof sources / sizeof sources[0])

static volatile uint64_t sink;

static double median_of(const char *name)
{
    for (size_t i = 0; i < NSRC; i++)
        if (strcmp(sources[i].name, name) == 0)
            return sources[i].median;
    return NAN;
}

static double batch(struct source *s)
{
    int64_t t0 = ts_ns(CLOCK_MONOTONIC_RAW);
    sink += s->loop(s->n);
    int64_t t1 = ts_ns(CLOCK_MONOTONIC_RAW);
    return (double)(t1 - t0) / (double)s->n;
}

static int usage(const char *why)
{
    fprintf(stderr, "fastclock-bench-core: %s\nusage: fastclock-bench-core [--seconds S]  (0.2 <= S <= 600)\n", why);
    return 2;
}

int main(int argc, char **argv)
{
    double seconds = 1.5;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            char *end;
            errno = 0;
            seconds = strtod(argv[++i], &end);
            if (errno || *end || !(seconds >= 0.2 && seconds <= 600))
                return usage("--seconds needs a number between 0.2 and 600");
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: fastclock-bench-core [--seconds S]\n");
            return 0;
        } else {
            char msg[256];
            snprintf(msg, sizeof msg, "unknown argument '%s'", argv[i]);
            return usage(msg);
        }
    }

    /* Warm up: the mode decision, the calibrator, the coarse ticker. */
    fastclock_mono_coarse_ns();
    fastclock_real_coarse_ns();
    for (int i = 0; i < 1000; i++)
        sink += (uint64_t)fastclock_mono_ns();
    usleep(50000);

    /* Calls per batch: about 1 ms each. */
    for (unsigned s = 0; s < NSRC; s++) {
        uint64_t n = 1000;
        for (;;) {
            sources[s].n = n;
            double per = batch(&sources[s]);
            if (per * (double)n > 1e6 || n > (1u << 26))
                break;
            n *= 2;
        }
    }
    /* What fastclock runs as the rounds start (after the batches' sizing,
     * which warmed every source): compared with after, below. */
    struct fastclock_status at_start;
    fastclock_status(&at_start);
    char mode_before[32], counter_before[64];
    snprintf(mode_before, sizeof mode_before, "%s", at_start.mode);
    snprintf(counter_before, sizeof counter_before, "%s", at_start.counter);
    int rounds = (int)(seconds / (NSRC * 1.1e-3));
    if (rounds < 5)
        rounds = 5;
    for (unsigned s = 0; s < NSRC; s++)
        sources[s].samples = calloc((size_t)rounds, sizeof(double));
    for (int r = 0; r < rounds; r++)
        for (unsigned s = 0; s < NSRC; s++)
            sources[s].samples[sources[s].count++] = batch(&sources[s]);
    for (unsigned s = 0; s < NSRC; s++) {
        struct source *x = &sources[s];
        x->median = bench_median(x->samples, x->count); /* sorts: min and max below */
        x->min = x->samples[0];
        x->max = x->samples[x->count - 1];
    }

    struct fastclock_status st;
    fastclock_status(&st);
    int changed = strcmp(st.mode, mode_before) != 0 || strcmp(st.counter, counter_before) != 0;
    printf("fastclock %s core benchmark\n", fastclock_version());
    bench_print_machine(stdout);
    printf("fastclock mode %s (%s calibrator), counter %s: %s\n", st.mode, st.calibrator, st.counter, st.reason);
    if (changed)
        printf("WARNING: fastclock's mode or counter changed during the run (%s, %s before): rows not comparable\n",
               mode_before, counter_before);
    printf("fastclock_* through libfastclock.so (its PLT), as a linked program calls them\n");
    printf("%d interleaved batches of ~1 ms per source; median ns per call\n\n", rounds);

    /* By name: the table's order may change. */
    double base_rdtsc = median_of("rdtsc (bare)"), base_cg = median_of("clock_gettime(MONOTONIC)");
    printf("%-36s %9s %9s %9s %10s %12s\n", "source", "median", "min", "max", "x rdtsc", "x clock_gt");
    for (unsigned s = 0; s < NSRC; s++) {
        struct source *x = &sources[s];
        printf("%-36s %9.2f %9.2f %9.2f %10.2f %12.2f\n", x->name, x->median, x->min, x->max,
               x->median / base_rdtsc, x->median / base_cg);
    }
    printf("\nx rdtsc: cost relative to a bare rdtsc; x clock_gt: relative to clock_gettime(CLOCK_MONOTONIC).\n");
    char ordered[48], unordered[48];
    printf("fastclock_mono_ns is %s clock_gettime(CLOCK_MONOTONIC); the unordered read is %s it.\n",
           bench_compare(ordered, sizeof ordered, median_of("fastclock_mono_ns"), base_cg),
           bench_compare(unordered, sizeof unordered, median_of("fastclock_mono_ns_unordered"), base_cg));
    double fa = median_of(FENCED_A_NAME), fb = median_of(FENCED_B_NAME), floor = fa < fb ? fa : fb;
    printf("The floors: ordered reads %.2fx the cheaper fenced read (%s, %.2f ns), unordered %.2fx a bare one.\n",
           median_of("fastclock_mono_ns") / floor, fa < fb ? FENCED_A_NAME : FENCED_B_NAME, floor,
           median_of("fastclock_mono_ns_unordered") / base_rdtsc);
    for (unsigned s = 0; s < NSRC; s++)
        free(sources[s].samples);
    return 0;
}
