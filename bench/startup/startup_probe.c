/* One process that reads the time once, the way a short-lived tool does.
 * Built twice: against libc alone (clock_gettime) and linked with
 * libfastclock (fastclock_mono_ns).  With an argument it also reports how
 * long that first read took, measured with raw system calls around it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifdef STARTUP_LINKED
#include "fastclock.h"
#endif

static long long raw_ns(void)
{
    struct timespec t;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

int main(int argc, char **argv)
{
    (void)argv;
    long long t0 = raw_ns();
#ifdef STARTUP_LINKED
    long long v = fastclock_mono_ns();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long v = ts.tv_sec * 1000000000LL + ts.tv_nsec;
#endif
    long long t1 = raw_ns();
    /* The bracket's own share (the second call's entry, the first's exit):
     * a back-to-back pair, taken off. */
    long long t2 = raw_ns();
    long long t3 = raw_ns();
    if (argc > 1)
        printf("%lld\n", (t1 - t0) - (t3 - t2));
    return v == 0; /* the read is used */
}
