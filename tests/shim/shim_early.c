/*
 * A library whose constructor reads the clock while the program starts,
 * before the shim's own constructor has run (the loader runs this one
 * first; shim_check verifies that it did).  It records what it saw.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim_early.h"

struct shim_early_record shim_early_record;

static int64_t sys_ns(clockid_t id)
{
    struct timespec ts;
    syscall(SYS_clock_gettime, id, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

__attribute__((constructor)) static void early_reads_the_clock(void)
{
    struct shim_early_record *r = &shim_early_record;
    int (*state)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "fastclock_preload_state");
    r->shim_state = state ? state() : -1;
    errno = 4321;
    struct timespec ts;
    r->k0 = sys_ns(CLOCK_MONOTONIC);
    r->ret = clock_gettime(CLOCK_MONOTONIC, &ts);
    r->k1 = sys_ns(CLOCK_MONOTONIC);
    r->errno_after = errno;
    r->value = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    struct timespec *volatile null_ts = 0;
    errno = 0;
    r->null_ret = clock_gettime(CLOCK_MONOTONIC, null_ts);
    r->null_errno = errno;
    r->ran = 1;
}
