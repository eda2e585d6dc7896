/* The wall clocks' offset check (wall.h): the cold refresh and the choices
 * made once. */
#define _GNU_SOURCE
#include "wall.h"

#include <errno.h>

__thread struct fc_wall_cache fc_wall_cache __attribute__((tls_model("initial-exec"))) = {
    INT64_MIN, 0, INT64_MIN, 0};
_Atomic(fc_gettime_fn) fc_wall_kernel;
_Atomic(fc_gettime_fn) fc_wall_direct;
_Atomic(fc_gettimeofday_fn) fc_wall_direct_tv;
_Atomic(fc_gettime_fn) fc_wall_direct_unordered;

/* 1: the kernel reads CLOCK_TAI; -1: it refuses it (before Linux 3.10, a
 * sandbox); 0: not asked yet. */
static _Atomic int tai_readable;

int fc_wall_probe_tai(void)
{
    int saved = errno;
    struct timespec ts;
    int r = fc_refclock_answering()(CLOCK_TAI, &ts) == 0 ? 1 : -1;
    errno = saved;
    atomic_store_explicit(&tai_readable, r, memory_order_relaxed);
    return r > 0;
}

int fc_wall_tai_readable(void)
{
    int r = atomic_load_explicit(&tai_readable, memory_order_relaxed);
    if (FC_LIKELY(r != 0))
        return r > 0;
    return fc_wall_probe_tai(); /* a TAI read before the decision */
}

void fc_wall_init(void)
{
    fc_gettime_fn f = fc_refclock_answering();
    atomic_store_explicit(&fc_wall_kernel, f, memory_order_relaxed);
    /* Tests install a new simulated kernel: this thread's cache described the old one. */
    fc_wall_cache.coarse_real = INT64_MIN;
    fc_wall_cache.tai_coarse = INT64_MIN;
}

/* The vDSO's entries that fc_wall_take_direct arms (NULL: the kernel's
 * clock does not read the counter, or is simulated). */
static _Atomic(fc_gettime_fn) direct_candidate;
static _Atomic(fc_gettimeofday_fn) direct_candidate_tv;

void fc_wall_choose(int kernel_reads_counter)
{
    /* A simulated kernel (tests) is never routed to: the line is under test. */
    fc_gettime_fn g = 0;
    fc_gettimeofday_fn tv = 0;
    if (kernel_reads_counter && !fc_seam.kernel_gettime) {
        g = fc_refclock_vdso_gettime();
        tv = fc_refclock_vdso_gettimeofday();
        if (!g || !tv)
            g = 0, tv = 0;
    }
    atomic_store_explicit(&direct_candidate_tv, tv, memory_order_relaxed);
    atomic_store_explicit(&direct_candidate, g, memory_order_relaxed);
    atomic_store_explicit(&fc_wall_direct_tv, (fc_gettimeofday_fn)0, memory_order_relaxed);
    atomic_store_explicit(&fc_wall_direct, (fc_gettime_fn)0, memory_order_relaxed);
    atomic_store_explicit(&fc_wall_direct_unordered, (fc_gettime_fn)0, memory_order_relaxed);
    fc_counter_time_wall(g != 0); /* mode tsc: which is cheaper, timed with the first line */
}

int fc_wall_take_direct(void)
{
    fc_gettime_fn g = atomic_load_explicit(&direct_candidate, memory_order_relaxed);
    if (!g)
        return 0;
    atomic_store_explicit(&fc_wall_direct_tv, atomic_load_explicit(&direct_candidate_tv, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&fc_wall_direct, g, memory_order_relaxed);
    return 1;
}

void fc_wall_to_kernel(fc_gettime_fn k)
{
    /* gettimeofday's own vDSO entry where k is the vDSO (as libc's IFUNC
     * resolves it); else fastclock_gettimeofday reaches k through the slow
     * path's routing pointer. */
    fc_gettimeofday_fn tv = k == fc_refclock_vdso_gettime() ? fc_refclock_vdso_gettimeofday() : 0;
    if (tv)
        atomic_store_explicit(&fc_wall_direct_tv, tv, memory_order_relaxed);
    atomic_store_explicit(&fc_wall_direct, k, memory_order_relaxed);
    atomic_store_explicit(&fc_wall_direct_unordered, k, memory_order_relaxed);
}

void fc_wall_forget_offsets(void)
{
    fc_wall_cache.coarse_real = INT64_MIN;
    fc_wall_cache.tai_coarse = INT64_MIN;
}

void fc_wall_enter_percpu(void)
{
    atomic_store_explicit(&fc_wall_direct_unordered, atomic_load_explicit(&fc_wall_direct, memory_order_relaxed),
                          memory_order_relaxed);
}

/*
 * MONOTONIC_COARSE, REALTIME_COARSE, MONOTONIC_COARSE: if both MONOTONIC
 * values agree, no timekeeping update came between them (every update moves
 * MONOTONIC on, a step included: the kernel first forwards the time to now),
 * so REALTIME - MONOTONIC of that update is exact.  Three vDSO calls, about
 * once per tick per thread.  (A step that lands exactly on the REALTIME_COARSE
 * value a thread last saw, to the nanosecond, would go unseen until the next
 * tick.)
 */
/* A bracket this narrow needs no second try (three vDSO reads take ~60 ns). */
#define FC_WALL_BRACKET_NS 1000

int64_t fc_wall_refresh(enum fc_kind kind)
{
    fc_gettime_fn f = atomic_load_explicit(&fc_wall_kernel, memory_order_relaxed);
    if (!f) {
        fc_wall_init();
        f = atomic_load_explicit(&fc_wall_kernel, memory_order_relaxed);
    }
    struct fc_wall_cache *c = &fc_wall_cache;
    for (int i = 0; i < 8; i++) {
        struct timespec m1, r, m2, tai, rt;
        if (f(CLOCK_MONOTONIC_COARSE, &m1) != 0 || f(CLOCK_REALTIME_COARSE, &r) != 0)
            break;
        /* TAI - REALTIME is whole seconds; one fine pair pins it, read inside
         * the update check: a leap second's update changes it and
         * REALTIME - MONOTONIC at once, and the two must be of one update. */
        int tai_ok = kind == FC_TAI && f(CLOCK_TAI, &tai) == 0 && f(CLOCK_REALTIME, &rt) == 0;
        if (f(CLOCK_MONOTONIC_COARSE, &m2) != 0)
            break;
        int64_t mono = fc_ts_to_ns(&m1), real = fc_ts_to_ns(&r);
        if (mono != fc_ts_to_ns(&m2))
            continue; /* an update came in between */
        int64_t off = real - mono;
        if (kind == FC_TAI) {
            /* No fine pair: no TAI - UTC seconds to cache (0 would make TAI
             * UTC until the next tick); the fine clocks below answer. */
            if (!tai_ok)
                break;
            int64_t d = fc_ts_to_ns(&tai) - fc_ts_to_ns(&rt);
            int64_t secs = (d >= 0 ? d + FC_NS_PER_SEC / 2 : d - FC_NS_PER_SEC / 2) / FC_NS_PER_SEC;
            c->tai_coarse = INT64_MIN;
            atomic_signal_fence(memory_order_seq_cst);
            c->tai_offset = off + secs * FC_NS_PER_SEC;
            atomic_signal_fence(memory_order_seq_cst);
            c->tai_coarse = real;
            return c->tai_offset;
        }
        c->coarse_real = INT64_MIN;
        atomic_signal_fence(memory_order_seq_cst);
        c->real_offset = off;
        atomic_signal_fence(memory_order_seq_cst);
        c->coarse_real = real;
        return off;
    }
    /* The coarse clocks cannot be read (or kept moving): the fine ones,
     * bracketed, uncached -- and no coarse value to hold REALTIME at (one
     * from before a step back would hold it there).  The narrowest of a few
     * brackets: its half-width is this offset's error, and one preempted
     * between its reads would put the offset off by half the preemption. */
    if (kind == FC_REAL)
        c->coarse_real = INT64_MIN;
    int64_t best = FC_WALL_NO_OFFSET, width = INT64_MAX;
    for (int i = 0; i < 4 && width > FC_WALL_BRACKET_NS; i++) {
        int64_t m1 = fc_kernel_ns(CLOCK_MONOTONIC);
        int64_t k = fc_kernel_ns(fc_kind_clock(kind));
        int64_t m2 = fc_kernel_ns(CLOCK_MONOTONIC);
        if (m1 == 0 || k == 0 || m2 == 0)
            break; /* the kernel refuses: no bracket now, nor in the next pass */
        int64_t w = m2 >= m1 ? m2 - m1 : INT64_MAX;
        if (w < width) {
            width = w;
            best = k - (m1 + (m2 - m1) / 2);
        }
    }
    return best;
}
