/*
 * Internal state shared by the library's files.  Not installed.  The line
 * itself (layout, publication, reading) is in line.h.
 */
#ifndef FC_INTERNAL_H
#define FC_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "fastclock.h"
#include "counter.h"
#include "line.h"

#define FC_HIDDEN __attribute__((visibility("hidden")))
#define FC_NS_PER_SEC 1000000000LL

enum fc_mode {
    FC_MODE_UNINIT = 0,
    FC_MODE_INITIALIZING,
    FC_MODE_TSC,
    FC_MODE_SYSTEM,
    FC_MODE_PERCPU,
};

FC_HIDDEN extern struct fc_latch fc_latch;
/* Written only by mode.c (fc_mode_enter); everyone else loads it. */
FC_HIDDEN extern _Atomic int fc_mode;

/* Coarse clocks: written by the calibrator thread about every millisecond.
 * mono == 0 means nobody ticks: readers ask the kernel's coarse clocks. */
struct fc_coarse {
    _Atomic int64_t mono __attribute__((aligned(64)));
    _Atomic int64_t real;      /* valid while mono != 0 */
    _Atomic int64_t floor_mono; /* last mono served before the ticker stopped */
};
FC_HIDDEN extern struct fc_coarse fc_coarse;

/* Slow path: initialisation, mode system, calibration due, expired lines. */
FC_HIDDEN int64_t fc_slow_read(enum fc_kind kind, int ordered);

#include "refclock.h"

FC_INLINE int64_t fc_ts_to_ns(const struct timespec *ts)
{
    return (int64_t)ts->tv_sec * FC_NS_PER_SEC + ts->tv_nsec;
}

FC_INLINE void fc_ns_to_ts(int64_t ns, struct timespec *ts)
{
    int64_t sec = ns / FC_NS_PER_SEC, rem = ns % FC_NS_PER_SEC;
    if (rem < 0) { rem += FC_NS_PER_SEC; sec -= 1; }
    ts->tv_sec = (time_t)sec;
    ts->tv_nsec = (long)rem;
}

/*
 * Splitting ns into seconds is a division by 10^9: a chain of multiplies
 * after the counter read that costs as much as the rest of a read.  Each
 * thread remembers, per timeline, the second it last returned and that
 * second in ns, so most splits are one subtraction and a compare.
 * Thread-local, so nothing shared is written.  A signal handler may rewrite
 * the pair between our loads: sec_ns is loaded before and after sec, and a
 * change sends this split to the division (the handler runs to completion,
 * so equal loads mean sec belongs to them).
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
    int64_t base = c->sec_ns;
    atomic_signal_fence(memory_order_seq_cst);
    int64_t sec = c->sec;
    atomic_signal_fence(memory_order_seq_cst);
    uint64_t rem = (uint64_t)(ns - base);
    if (FC_UNLIKELY(rem >= (uint64_t)FC_NS_PER_SEC || base != c->sec_ns))
        return 0;
    *sec_out = sec;
    *rem_ns = (int64_t)rem;
    return 1;
}

FC_INLINE int64_t fc_split_seconds(enum fc_kind kind, int64_t ns, int64_t *rem_ns)
{
    struct fc_sec_cache *c = &fc_sec_cache[kind];
    int64_t base = c->sec_ns;
    atomic_signal_fence(memory_order_seq_cst);
    int64_t sec = c->sec;
    atomic_signal_fence(memory_order_seq_cst);
    uint64_t rem = (uint64_t)(ns - base);
    if (FC_UNLIKELY(rem >= (uint64_t)FC_NS_PER_SEC || base != c->sec_ns)) {
        sec = fc_new_second(kind, ns);
        rem = (uint64_t)(ns - sec * FC_NS_PER_SEC);
    }
    *rem_ns = (int64_t)rem;
    return sec;
}

/* ---- test seam (seam.h, testing.c) ---- */
#include "seam.h"
FC_HIDDEN extern struct fc_seam fc_seam;

FC_INLINE uint64_t fc_now_counter(int ordered)
{
    if (FC_UNLIKELY(fc_seam.counter != 0))
        return fc_seam.counter();
    return ordered ? fc_counter_ordered() : fc_counter_unordered();
}

/* rdtscp: the counter and TSC_AUX, read atomically on one CPU. */
FC_INLINE uint64_t fc_now_counter_aux(uint32_t *aux)
{
    if (FC_UNLIKELY(fc_seam.counter_aux != 0))
        return fc_seam.counter_aux(aux);
    return fc_counter_rdtscp(aux);
}
#define FC_AUX_CPU(aux) ((int)((aux) & 0xfff))

/* The seam's counter for fc_line_copy (arg: (void *)1 for ordered). */
static inline uint64_t fc_copy_counter(void *ordered)
{
    return fc_now_counter(ordered != 0);
}

/* The kernel's clock behind each kind. */
FC_INLINE clockid_t fc_kind_clock(enum fc_kind kind)
{
    switch (kind) {
    case FC_REAL: return CLOCK_REALTIME;
    case FC_BOOT: return CLOCK_BOOTTIME;
    case FC_TAI: return CLOCK_TAI;
    default: return CLOCK_MONOTONIC;
    }
}

#endif
