/*
 * Internal state shared by the library's files.  Not installed.
 *
 * The clock is a straight line per calibration epoch:
 *
 *     ns(t) = base_ns + (base_frac + (t - base_tsc) * mult) / 2^FC_SHIFT
 *
 * kept in fixed point so that a new line can start exactly where the
 * old one was (no rounding step).  Lines are published through a two-slot
 * buffer and a sequence number: the writer fills the slot readers are not
 * using, then bumps seq.  A reader that interrupts the writer (a signal
 * handler) or a child forked in the middle of a write always finds a
 * complete line, so reads never spin on a writer.
 */
#ifndef FC_INTERNAL_H
#define FC_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "fastclock.h"
#include "counter.h"

#define FC_INLINE static inline __attribute__((always_inline))
#define FC_HIDDEN __attribute__((visibility("hidden")))
#define FC_LIKELY(x) __builtin_expect(!!(x), 1)
#define FC_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define FC_NS_PER_SEC 1000000000LL
/* Fixed-point shift of the line: 2^-40 ns per tick keeps rounding below
 * 0.01 ns over the longest line, and any counter from 0.1 Hz to 1 THz fits. */
#define FC_SHIFT 40

enum fc_mode {
    FC_MODE_UNINIT = 0,
    FC_MODE_INITIALIZING,
    FC_MODE_TSC,
    FC_MODE_SYSTEM,
    FC_MODE_PERCPU,
};

enum fc_kind { FC_MONO, FC_REAL, FC_BOOT, FC_TAI };

/* Hot part of a line: exactly one cache line, read on every call. */
struct fc_line {
    uint64_t base_tsc;
    uint64_t fast_span;   /* reads with t - base_tsc >= fast_span take the slow path */
    int64_t mult;         /* ns per tick << FC_SHIFT */
    int64_t base_ns;      /* CLOCK_MONOTONIC at base_tsc, integer part */
    uint64_t base_frac;   /* fractional part, units of 2^-FC_SHIFT ns */
    int64_t real_offset;  /* CLOCK_REALTIME - CLOCK_MONOTONIC */
    int64_t boot_offset;  /* CLOCK_BOOTTIME - CLOCK_MONOTONIC */
    int64_t tai_offset;   /* CLOCK_TAI - CLOCK_REALTIME */
} __attribute__((aligned(64)));

/* Cold part: read by the slow path and fastclock_status under the same seq. */
struct fc_meta {
    uint64_t soft_span;   /* beyond: never used again; a reader recalibrates or asks the kernel */
    int64_t error_bound_ns;  /* at publication ... */
    int64_t bound_growth_ppb; /* ... growing by this many ns per second of age */
    int64_t floor_ns;     /* mode system: no MONOTONIC read returns less */
    uint64_t epoch;
    int64_t published_mono_ns;
} __attribute__((aligned(64)));

struct fc_latch {
    _Atomic uint64_t seq __attribute__((aligned(64)));
    struct fc_line line[2];
    struct fc_meta meta[2];
};

FC_HIDDEN extern struct fc_latch fc_latch;
FC_HIDDEN extern _Atomic int fc_mode;

/* Coarse clocks: written by the calibrator thread about every millisecond.
 * mono == 0 means nobody ticks: readers ask the kernel's coarse clocks. */
struct fc_coarse {
    _Atomic int64_t mono __attribute__((aligned(64)));
    _Atomic int64_t real;      /* valid while mono != 0 */
    _Atomic int64_t floor_mono; /* last mono served before the ticker stopped */
};
FC_HIDDEN extern struct fc_coarse fc_coarse;

/* A snapshot of the hot line plus the counter value read under it. */
struct fc_snap {
    uint64_t t;
    uint64_t base_tsc;
    uint64_t fast_span;
    int64_t mult;
    int64_t base_ns;
    uint64_t base_frac;
    int64_t offset;       /* the offset for the requested kind */
};

#define FC_LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)

FC_INLINE int64_t fc_kind_offset(const struct fc_line *l, enum fc_kind kind)
{
    switch (kind) {
    case FC_REAL: return FC_LOAD(&l->real_offset);
    case FC_BOOT: return FC_LOAD(&l->boot_offset);
    case FC_TAI: return FC_LOAD(&l->real_offset) + FC_LOAD(&l->tai_offset);
    default: return 0;
    }
}

/*
 * The read path.  The counter is read between the two loads of seq, so a
 * value computed from line k was sampled before line k+1 became visible
 * (up to the CPU's speculation window, which the writer's pivot rule in
 * calibration.c covers).  With `ordered`, lfence keeps the counter read
 * behind the loads before it: behind the seq load, and behind whatever the
 * caller did to synchronise with another thread.
 */
FC_INLINE int fc_snapshot(struct fc_snap *s, enum fc_kind kind, int ordered)
{
    uint64_t seq;
    do {
        seq = atomic_load_explicit(&fc_latch.seq, memory_order_acquire);
        const struct fc_line *l = &fc_latch.line[seq & 1];
        /* Keep one base register: otherwise GCC hoists a pointer per field
         * out of the retry loop and spills five callee-saved registers. */
        __asm__("" : "+r"(l));
        s->base_tsc = FC_LOAD(&l->base_tsc);
        s->fast_span = FC_LOAD(&l->fast_span);
        s->mult = FC_LOAD(&l->mult);
        s->base_ns = FC_LOAD(&l->base_ns);
        s->base_frac = FC_LOAD(&l->base_frac);
        s->offset = fc_kind_offset(l, kind);
        /* A line that routes every read elsewhere (mode system, tsc-percpu,
         * first use): skip the counter read, the slow path has its own. */
        if (FC_UNLIKELY(s->fast_span == 0))
            return 0;
        s->t = ordered ? fc_counter_ordered() : fc_counter_unordered();
        atomic_thread_fence(memory_order_acquire);
    } while (FC_UNLIKELY(seq != atomic_load_explicit(&fc_latch.seq, memory_order_relaxed)));
    return 1;
}

/* Evaluate a line at d = t - base_tsc ticks (d may be negative when the
 * pivot lies ahead; the product is exact in 128 bits). */
FC_INLINE int64_t fc_eval(int64_t base_ns, uint64_t base_frac, int64_t mult, int64_t d)
{
    __int128 x = (__int128)d * mult + (__int128)base_frac;
    return base_ns + (int64_t)(x >> FC_SHIFT);
}

/* Fixed-point value of a line at d: used by the writer for exact continuity. */
FC_INLINE __int128 fc_eval_fixed(int64_t base_ns, uint64_t base_frac, int64_t mult, int64_t d)
{
    return ((__int128)base_ns << FC_SHIFT) + (__int128)base_frac + (__int128)d * mult;
}

/* Slow path: initialisation, mode system, calibration due, expired lines. */
FC_HIDDEN int64_t fc_slow_read(enum fc_kind kind, int ordered);

/* ---- reference clock (refclock.c) ---------------------------------------
 * The kernel's clocks, reached through the vDSO or a raw system call, never
 * through the symbol clock_gettime (which the preload shim replaces). */
typedef int (*fc_gettime_fn)(clockid_t, struct timespec *);
FC_HIDDEN int fc_kernel_gettime(clockid_t id, struct timespec *ts);
FC_HIDDEN int fc_kernel_gettimeofday(struct timeval *tv, void *tz);
FC_HIDDEN int64_t fc_kernel_ns(clockid_t id);
FC_HIDDEN void fc_refclock_init(void);
FC_HIDDEN int fc_refclock_has_vdso(void);
FC_HIDDEN void *fc_vdso_sym(const char *name, const char *version);

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
 * thread remembers the second it last returned per timeline, so most splits
 * only subtract and compare.  Thread-local, so nothing shared is written;
 * a signal handler that changes it between our load and our check only
 * makes the check fail over to the division.
 */
FC_HIDDEN extern __thread int64_t fc_last_second[FC_TAI + 1] __attribute__((tls_model("initial-exec")));
FC_HIDDEN int64_t fc_new_second(enum fc_kind kind, int64_t ns);

FC_INLINE int64_t fc_split_seconds(enum fc_kind kind, int64_t ns, int64_t *rem_ns)
{
    int64_t sec = fc_last_second[kind];
    uint64_t rem = (uint64_t)(ns - sec * FC_NS_PER_SEC);
    if (FC_UNLIKELY(rem >= (uint64_t)FC_NS_PER_SEC)) {
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

/* A consistent copy of a latch's current line and meta (slow paths).  With
 * t, the counter is read inside the same window, so a value computed from
 * this line was sampled before the next line became visible. */
FC_INLINE uint64_t fc_latch_copy(const struct fc_latch *latch, struct fc_line *l, struct fc_meta *m,
                                 uint64_t *t, int ordered)
{
    uint64_t seq;
    do {
        seq = atomic_load_explicit(&latch->seq, memory_order_acquire);
        const uint64_t *src = (const uint64_t *)&latch->line[seq & 1];
        uint64_t *dst = (uint64_t *)l;
        for (unsigned i = 0; i < sizeof *l / 8; i++)
            dst[i] = FC_LOAD(&src[i]);
        src = (const uint64_t *)&latch->meta[seq & 1];
        dst = (uint64_t *)m;
        for (unsigned i = 0; i < sizeof *m / 8; i++)
            dst[i] = FC_LOAD(&src[i]);
        if (t)
            *t = fc_now_counter(ordered);
        atomic_thread_fence(memory_order_acquire);
    } while (seq != atomic_load_explicit(&latch->seq, memory_order_relaxed));
    return seq;
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
