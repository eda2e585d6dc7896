/*
 * What a program pays for the time through libc's symbols: clock_gettime,
 * gettimeofday and time, called the way any program calls them (through
 * its PLT), so that the same binary measures the kernel's vDSO when run
 * plain and fastclock when run with the shim preloaded.
 *
 * Sources are measured interleaved, batch by batch; each batch is timed
 * with a raw CLOCK_MONOTONIC_RAW system call, which nothing interposes and
 * which costs well under 0.1% of a batch.  Prints "name median_ns" lines.
 *
 * usage: shim_bench [BATCHES] [CALLS_PER_BATCH]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t sink;

static int64_t raw_ns(void)
{
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC_RAW, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#define LOOP_GETTIME(id)                               \
    static void loop_##id(long n)                      \
    {                                                  \
        struct timespec ts;                            \
        int64_t s = 0;                                 \
        for (long i = 0; i < n; i++) {                 \
            clock_gettime(id, &ts);                    \
            s += ts.tv_nsec;                           \
        }                                              \
        sink += s;                                     \
    }
LOOP_GETTIME(CLOCK_MONOTONIC)
LOOP_GETTIME(CLOCK_REALTIME)
LOOP_GETTIME(CLOCK_MONOTONIC_COARSE)
LOOP_GETTIME(CLOCK_PROCESS_CPUTIME_ID)

static void loop_gettimeofday(long n)
{
    struct timeval tv;
    int64_t s = 0;
    for (long i = 0; i < n; i++) {
        gettimeofday(&tv, NULL);
        s += tv.tv_usec;
    }
    sink += s;
}

/* What clock_gettime costs where the vDSO falls back to a system call
 * (clocksource hpet, acpi_pm, xen without a stable TSC): at least this. */
static void loop_syscall(long n)
{
    struct timespec ts;
    int64_t s = 0;
    for (long i = 0; i < n; i++) {
        syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
        s += ts.tv_nsec;
    }
    sink += s;
}

static void loop_time(long n)
{
    int64_t s = 0;
    for (long i = 0; i < n; i++)
        s += time(NULL);
    sink += s;
}

struct source {
    const char *name;
    void (*loop)(long);
    long scale; /* fewer calls for slow sources */
    double *ns;
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int batches = argc > 1 ? atoi(argv[1]) : 41;
    long calls = argc > 2 ? atol(argv[2]) : 50000;
    struct source src[] = {
        {"clock_gettime(CLOCK_MONOTONIC)", loop_CLOCK_MONOTONIC, 1, 0},
        {"clock_gettime(CLOCK_REALTIME)", loop_CLOCK_REALTIME, 1, 0},
        {"clock_gettime(CLOCK_MONOTONIC_COARSE)", loop_CLOCK_MONOTONIC_COARSE, 1, 0},
        {"gettimeofday", loop_gettimeofday, 1, 0},
        {"time", loop_time, 1, 0},
        {"clock_gettime(CLOCK_PROCESS_CPUTIME_ID)", loop_CLOCK_PROCESS_CPUTIME_ID, 20, 0},
        {"syscall(SYS_clock_gettime, MONOTONIC)", loop_syscall, 20, 0},
    };
    size_t n = sizeof src / sizeof src[0];
    for (size_t s = 0; s < n; s++) {
        src[s].ns = calloc((size_t)batches, sizeof(double));
        src[s].loop(calls / src[s].scale); /* warm up; the first read decides fastclock's mode */
    }
    for (int b = 0; b < batches; b++)
        for (size_t s = 0; s < n; s++) {
            long k = calls / src[s].scale;
            int64_t t0 = raw_ns();
            src[s].loop(k);
            src[s].ns[b] = (double)(raw_ns() - t0) / (double)k;
        }
    int (*state)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fastclock_preload_state");
    printf("# shim %s\n", state ? ((state() & 4) ? "unordered" : "ordered") : "absent");
    for (size_t s = 0; s < n; s++) {
        qsort(src[s].ns, (size_t)batches, sizeof(double), cmp_double);
        printf("%s %.2f\n", src[s].name, src[s].ns[batches / 2]);
    }
    return 0;
}
