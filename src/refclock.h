/* The reference: the kernel's own clocks (refclock.c), reached through the
 * vDSO or a raw system call, never through the symbol clock_gettime (which
 * the preload shim replaces).  Async-signal-safe. */
#ifndef FC_REFCLOCK_H
#define FC_REFCLOCK_H

#include <errno.h>
#include <stdint.h>
#include <sys/time.h>
#include <time.h>

#define FC_REFCLOCK_HIDDEN __attribute__((visibility("hidden")))

typedef int (*fc_gettime_fn)(clockid_t, struct timespec *);
FC_REFCLOCK_HIDDEN int fc_kernel_gettime(clockid_t id, struct timespec *ts);
FC_REFCLOCK_HIDDEN int fc_kernel_gettimeofday(struct timeval *tv, void *tz);
FC_REFCLOCK_HIDDEN int64_t fc_kernel_ns(clockid_t id);
FC_REFCLOCK_HIDDEN void fc_refclock_init(void);
/* A vDSO call's result as libc returns it: where the vDSO falls back to the
 * system call (hpet, acpi_pm, a clocksource being changed) it returns
 * -errno (-EFAULT for a bad buffer); libc sets errno and returns -1. */
static inline __attribute__((always_inline)) int fc_vdso_result(int r)
{
    if (__builtin_expect(r != 0, 0)) {
        errno = -r;
        return -1;
    }
    return 0;
}
/* The vDSO's clock_gettime and gettimeofday (return -errno), or NULL
 * without a vDSO. */
typedef int (*fc_gettimeofday_fn)(struct timeval *, void *);
FC_REFCLOCK_HIDDEN fc_gettime_fn fc_refclock_vdso_gettime(void);
FC_REFCLOCK_HIDDEN fc_gettimeofday_fn fc_refclock_vdso_gettimeofday(void);
FC_REFCLOCK_HIDDEN void *fc_vdso_sym(const char *name, const char *version);
/* The vDSO's clock_gettime, or without a vDSO the system call in the same
 * convention (-errno, errno untouched on success): never NULL. */
FC_REFCLOCK_HIDDEN fc_gettime_fn fc_refclock_direct(void);
/* What the library calls where the kernel answers directly: the test seam's
 * simulated kernel while one is installed, else fc_refclock_direct(). */
FC_REFCLOCK_HIDDEN fc_gettime_fn fc_refclock_answering(void);
/* A result of fc_refclock_answering()'s function (and of the routes the
 * reads store, which answer the same way) as libc returns it: the kernel's
 * -errno (-EPERM is -1: a seccomp filter refusing the system call the
 * vDSO falls back to) sets errno; the seam's simulated kernel follows
 * libc's convention and has set it. */
FC_REFCLOCK_HIDDEN int fc_answering_result(int r);

#endif
