/*
 * kselftest-style consistency check (after tools/testing/selftests/timers/
 * inconsistency-check.c), through whatever clock_gettime the process has:
 * back-to-back reads of each clock for SECONDS, on every CPU at once, each
 * thread checking its own sequence.  Any decrease fails.  The shim's
 * unordered mode promises exactly this much, so it is run both ways.
 *
 * usage: shim_consistency SECONDS_PER_CLOCK
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "forced_mode.h"

#define NS 1000000000LL

struct clock_case {
    const char *name;
    clockid_t id; /* -1: gettimeofday, -2: time */
};
static const struct clock_case cases[] = {
    {"CLOCK_REALTIME", CLOCK_REALTIME},
    {"CLOCK_MONOTONIC", CLOCK_MONOTONIC},
    {"CLOCK_REALTIME_COARSE", CLOCK_REALTIME_COARSE},
    {"CLOCK_MONOTONIC_COARSE", CLOCK_MONOTONIC_COARSE},
    {"CLOCK_BOOTTIME", CLOCK_BOOTTIME},
    {"CLOCK_TAI", CLOCK_TAI},
    {"gettimeofday", -1},
    {"time", -2},
};

struct worker {
    clockid_t id;
    int cpu;
    double seconds;
    long reads, decreases;
    int64_t worst, before, after;
};

static inline int64_t read_clock(clockid_t id)
{
    if (id == -1) {
        struct timeval tv;
        gettimeofday(&tv, NULL);
        return (int64_t)tv.tv_sec * NS + tv.tv_usec * 1000;
    }
    if (id == -2)
        return (int64_t)time(NULL) * NS;
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC_RAW, &t0); /* not served by fastclock: the run's length */
    int64_t prev = read_clock(w->id);
    for (;;) {
        for (int i = 0; i < 4096; i++) {
            int64_t v = read_clock(w->id);
            if (v < prev) {
                if (w->decreases++ == 0) {
                    w->before = prev;
                    w->after = v;
                }
                if (prev - v > w->worst)
                    w->worst = prev - v;
            }
            prev = v;
        }
        w->reads += 4096;
        clock_gettime(CLOCK_MONOTONIC_RAW, &t);
        if ((t.tv_sec - t0.tv_sec) * NS + (t.tv_nsec - t0.tv_nsec) >= (int64_t)(w->seconds * NS))
            return NULL;
    }
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 1.0;
    int (*state)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fastclock_preload_state");
    if (!state) {
        fprintf(stderr, "FAIL: not running under libfastclock-preload.so\n");
        return 1;
    }
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1)
        ncpu = 1;
    if (ncpu > 64)
        ncpu = 64;
    printf("consistency through the shim (%s reads), %d CPUs, %.1f s per clock\n",
           (state() & 4) ? "unordered" : "ordered", ncpu, seconds);
    int failed = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct worker w[64];
        pthread_t t[64];
        for (int i = 0; i < ncpu; i++) {
            memset(&w[i], 0, sizeof w[i]);
            w[i].id = cases[c].id;
            w[i].cpu = i;
            w[i].seconds = seconds;
            pthread_create(&t[i], NULL, run, &w[i]);
        }
        long reads = 0, decreases = 0;
        int64_t worst = 0;
        for (int i = 0; i < ncpu; i++) {
            pthread_join(t[i], NULL);
            reads += w[i].reads;
            decreases += w[i].decreases;
            if (w[i].worst > worst)
                worst = w[i].worst;
            if (w[i].decreases)
                printf("    cpu %d: %" PRId64 " then %" PRId64 "\n", i, w[i].before, w[i].after);
        }
        printf("  %-24s %10ld reads  %ld decreases  [%s]\n", cases[c].name, reads, decreases,
               decreases ? "FAILED" : "OK");
        if (decreases)
            printf("    worst decrease %" PRId64 " ns\n", worst);
        failed |= decreases != 0;
    }
    return failed ? 1 : forced_mode_verdict();
}
