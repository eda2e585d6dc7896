/*
 * A test-only preload that counts the calls reaching it and forwards them
 * to the next definition.  Preloaded AFTER the shim (LD_PRELOAD="shim spy")
 * it sees exactly what the shim passes on to libc: nothing for the clocks
 * fastclock serves, in any mode (mode system jumps into the vDSO itself),
 * and every other clock id.  Preloaded
 * BEFORE the shim it sees every call a program makes through the symbol.
 *
 * Counts are read with shim_spy_counts(), or written at exit to the file
 * named by SHIM_SPY_OUT (for programs such as the JVM).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

enum { SPY_MONO, SPY_REAL, SPY_MONO_COARSE, SPY_REAL_COARSE, SPY_BOOT, SPY_TAI, SPY_OTHER_ID,
       SPY_GETTIMEOFDAY, SPY_TIME, SPY_TIMESPEC_GET, SPY_N };
static const char *const spy_names[SPY_N] = {"mono", "real", "mono_coarse", "real_coarse", "boot", "tai",
                                             "other_id", "gettimeofday", "time", "timespec_get"};
static _Atomic unsigned long counts[SPY_N];

#define SPY_API __attribute__((visibility("default")))

static void *next(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

SPY_API int clock_gettime(clockid_t id, struct timespec *ts)
{
    static int (*f)(clockid_t, struct timespec *);
    int slot;
    switch (id) {
    case CLOCK_MONOTONIC: slot = SPY_MONO; break;
    case CLOCK_REALTIME: slot = SPY_REAL; break;
    case CLOCK_MONOTONIC_COARSE: slot = SPY_MONO_COARSE; break;
    case CLOCK_REALTIME_COARSE: slot = SPY_REAL_COARSE; break;
    case CLOCK_BOOTTIME: slot = SPY_BOOT; break;
    case CLOCK_TAI: slot = SPY_TAI; break;
    default: slot = SPY_OTHER_ID; break;
    }
    atomic_fetch_add(&counts[slot], 1);
    if (!f)
        f = (int (*)(clockid_t, struct timespec *))next("clock_gettime");
    return f(id, ts);
}

SPY_API int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    static int (*f)(struct timeval *, void *);
    atomic_fetch_add(&counts[SPY_GETTIMEOFDAY], 1);
    if (!f)
        f = (int (*)(struct timeval *, void *))next("gettimeofday");
    return f(tv, tz);
}

SPY_API time_t time(time_t *t)
{
    static time_t (*f)(time_t *);
    atomic_fetch_add(&counts[SPY_TIME], 1);
    if (!f)
        f = (time_t (*)(time_t *))next("time");
    return f(t);
}

SPY_API int timespec_get(struct timespec *ts, int base)
{
    static int (*f)(struct timespec *, int);
    atomic_fetch_add(&counts[SPY_TIMESPEC_GET], 1);
    if (!f)
        f = (int (*)(struct timespec *, int))next("timespec_get");
    return f(ts, base);
}

SPY_API void shim_spy_counts(unsigned long out[SPY_N])
{
    for (int i = 0; i < SPY_N; i++)
        out[i] = atomic_load(&counts[i]);
}

SPY_API void shim_spy_reset(void)
{
    for (int i = 0; i < SPY_N; i++)
        atomic_store(&counts[i], 0);
}

__attribute__((destructor)) static void spy_report(void)
{
    const char *path = getenv("SHIM_SPY_OUT");
    if (!path || !*path)
        return;
    char line[512];
    size_t n = 0;
    for (int i = 0; i < SPY_N && n < sizeof line; i++)
        n += (size_t)snprintf(line + n, sizeof line - n, "%s%s=%lu", i ? " " : "", spy_names[i],
                              atomic_load(&counts[i]));
    if (n < sizeof line - 1)
        line[n++] = '\n';
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
        ssize_t r = write(fd, line, n);
        (void)r;
        close(fd);
    }
}
