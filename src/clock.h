/* The public read paths' internal API (clock.c), for the preload shim, the
 * calibrator thread and the tests: the slow path, the per-thread split into
 * seconds, and the state of the deferred decision. */
#ifndef FC_CLOCK_H
#define FC_CLOCK_H

#include "internal.h"

/* Slow path: initialisation, mode system, calibration due, expired lines. */
FC_HIDDEN int64_t fc_slow_read(enum fc_kind kind, int ordered);

/* tsc-percpu's lines as a route of the reads' first test (line.h
 * fc_kernel_route, beside the kernel's clock): clock_gettime's shape, for
 * MONOTONIC, BOOTTIME and the wall clocks.  A reader that finds it there
 * calls it as it would the kernel's clock -- except the shim, which must
 * not take it for the kernel (libc's values may not follow a per-CPU line's). */
FC_HIDDEN int fc_percpu_route_gettime(clockid_t id, struct timespec *ts);

/* The calibrator thread: has the process read the time yet (it decides a
 * millisecond after the first read)? */
FC_HIDDEN int fc_decision_wanted(void);
/* A calibrator thread will tick the coarse clocks but has not yet (mode
 * tsc or tsc-percpu, the thread running, nothing published): the coarse
 * reads hand over to its first tick (upkeep.c), the shim's too. */
FC_HIDDEN int fc_coarse_ticker_coming(void);
/* A clock id every Linux kernel has, whose NULL timespec is EFAULT without
 * asking it (clock_gettime's gettime_null, the core's and the shim's): no
 * system call, which a sandbox that relies on the vDSO may kill. */
FC_INLINE int fc_clock_always_there(clockid_t id)
{
    return id == CLOCK_MONOTONIC || id == CLOCK_REALTIME || id == CLOCK_MONOTONIC_COARSE ||
           id == CLOCK_REALTIME_COARSE || id == CLOCK_BOOTTIME;
}

/* Tests: forget the deferred decision (reads decide at once). */
FC_HIDDEN void fc_clock_reset_for_tests(void);

/*
 * Splitting ns into seconds is a division by 10^9: a chain of multiplies
 * after the counter read that costs as much as the rest of a read.  Each
 * thread remembers, per timeline, the second it last returned and that
 * second in ns, so most splits are one subtraction and a compare.
 * Thread-local, so nothing shared is written.  A signal handler may split
 * a new second between any two of our loads or stores, so a pair may be
 * torn (one second with another's ns, left even after both have returned):
 * the reader uses a pair only if sec * 10^9 == sec_ns.  That multiply needs
 * only the two loads, not the counter, so it runs beside the read.
 */
struct fc_sec_cache {
    int64_t sec;
    int64_t sec_ns;
};
FC_HIDDEN extern __thread struct fc_sec_cache fc_sec_cache[FC_TAI + 1] __attribute__((tls_model("initial-exec")));
FC_HIDDEN int64_t fc_new_second(enum fc_kind kind, int64_t ns);

/* The cached split only: 0 when ns is not in this thread's cached second. */
FC_INLINE int fc_split_seconds_cached(enum fc_kind kind, int64_t ns, int64_t *sec_out, int64_t *rem_ns)
{
    struct fc_sec_cache *c = &fc_sec_cache[kind];
    int64_t base = c->sec_ns, sec = c->sec;
    uint64_t rem = (uint64_t)ns - (uint64_t)base; /* unsigned: no overflow, and below base is far */
    if (FC_UNLIKELY(rem >= (uint64_t)FC_NS_PER_SEC || (uint64_t)sec * (uint64_t)FC_NS_PER_SEC != (uint64_t)base))
        return 0;
    *sec_out = sec;
    *rem_ns = (int64_t)rem;
    return 1;
}

FC_INLINE int64_t fc_split_seconds(enum fc_kind kind, int64_t ns, int64_t *rem_ns)
{
    int64_t sec;
    if (FC_UNLIKELY(!fc_split_seconds_cached(kind, ns, &sec, rem_ns))) {
        sec = fc_new_second(kind, ns);
        *rem_ns = ns - sec * FC_NS_PER_SEC;
    }
    return sec;
}

#endif
