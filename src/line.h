/*
 * The line: its layout, its one publisher and its one reader.
 *
 * A line maps the counter to CLOCK_MONOTONIC for one calibration epoch:
 *
 *     ns(t) = base_ns + (base_frac + (t - base_tsc) * mult) / 2^FC_SHIFT
 *
 * kept in fixed point so that a new line can start exactly where the old one
 * was (no rounding step).  Lines are published through a two-slot buffer and
 * a sequence number: the writer fills the slot readers are not using, then
 * bumps seq.  A reader that interrupts the writer (a signal handler) or a
 * child forked in the middle of a write always finds a complete line, so
 * reads never wait for a writer.
 *
 * Every line in the library -- the global one and each CPU's in tsc-percpu
 * mode -- is published by fc_line_publish and read by fc_line_read (hot
 * path) or fc_line_copy (slow paths).  Nothing else in the library touches a
 * latch; outside it, fastclock_inline.h's inline reads copy fc_line_read's
 * MONOTONIC path over the global latch (fastclock_line_v1, layout asserted
 * in line.c): a change here must keep that copy in step.
 */
#ifndef FC_LINE_H
#define FC_LINE_H

#include <stdatomic.h>
#include <stdint.h>

#include "base.h"
#include "counter.h"

/* Fixed-point shift: mult is ns per tick in units of 2^-32 ns.  Quantising
 * the rate to 2^-32 ns per tick costs at most 2^-33 ns a tick: 0.5 ns over
 * a 2 s line at 2.15 GHz, 0.7 ns at 3 GHz; in
 * exchange (base_frac + d * mult) fits in 64 bits for any d < fast_span, so
 * the read path multiplies 64 x 64 -> 64 (the vDSO's arithmetic). */
#define FC_SHIFT 32


/* Hot part of a line: exactly one cache line, read on every call. */
struct fc_line {
    uint64_t base_tsc;
    uint64_t fast_span;   /* reads with t - base_tsc >= fast_span take the slow path;
                             0: every read does (mode system, tsc-percpu, first use, an
                             injected counter, every read routed to the kernel) */
    int64_t mult;         /* ns per tick << FC_SHIFT, > 0 */
    int64_t base_ns;      /* CLOCK_MONOTONIC at base_tsc, integer part */
    uint64_t frac_c;      /* base_frac - base_tsc * mult (mod 2^64): lets the reader
                             compute t * mult + frac_c without subtracting first */
    int64_t real_offset;  /* CLOCK_REALTIME - CLOCK_MONOTONIC */
    int64_t boot_offset;  /* CLOCK_BOOTTIME - CLOCK_MONOTONIC */
    int64_t tai_offset;   /* CLOCK_TAI - CLOCK_MONOTONIC (real_offset included) */
} __attribute__((aligned(64)));

/* Cold part: read by the slow path and fastclock_status under the same seq. */
struct fc_meta {
    uint64_t soft_span;   /* beyond: never used again; a reader recalibrates or asks the kernel */
    int64_t error_bound_ns;  /* at publication ... */
    int64_t bound_growth_ppb; /* ... growing by this many ns per second of age */
    int64_t floor_ns;     /* mode system: no MONOTONIC read returns less */
    uint64_t epoch;
    int64_t published_mono_ns;
    /* The last look at the kernel that found the line within its bound
     * (its publication, or a reader's poll): unseen rate changes are
     * charged from here (sync.c), as no adjtimex poll can rule out a change
     * made and undone meanwhile.  Written with the line, by its writer. */
    int64_t checked_mono_ns;
    long tick_us;         /* the adjtimex tick its rate was measured or rescaled under (0: not known) */
    uint64_t uncut_span;  /* a line republished with its end cut short: the soft_span it had
                             (0: not cut), which readers may have used before the cut showed */
} __attribute__((aligned(64)));


struct fc_latch {
    _Atomic uint64_t seq __attribute__((aligned(64)));
    uint32_t read_flags;  /* FC_READ_*: same cache line as seq, so free to load */
    /* Where the kernel answers every fine read (mode system from the start,
     * or tsc-percpu routed to it): the kernel's clock, tested first by the
     * library's reads (clock.c fc_read) and fastclock_inline.h's.  Written
     * by clock.c only: route_decided, percpu_kernel_read once the
     * kernel has passed the switch floor (beside its routing pointer for the
     * slow path, which says the same), or routed_kernel_read under
     * FC_READ_KERNEL (counter.h).  Or, where tsc-percpu's lines answer, their
     * entry fc_percpu_route_gettime (clock.c take_percpu_route: the global
     * line has nothing to say there), which takes itself down if the mode
     * leaves them; never over a kernel route. */
    int (*_Atomic kernel_direct)(clockid_t, struct timespec *);
    /* The same for the ordered reads alone: set with kernel_direct, and
     * where FC_READ_ORDERED_KERNEL sends them to the kernel (clock.c, by the
     * first such read, stored only if it differs), or tsc-percpu's lines.  The library's own; the
     * header's ordered read sees the flag and calls the function. */
    int (*_Atomic kernel_ordered)(clockid_t, struct timespec *);
    struct fc_line line[2];
    struct fc_meta meta[2];
};

/* The global line (line.c); tsc-percpu's lines live in percpu.c. */
extern struct fc_latch fc_latch __attribute__((visibility("hidden")));

/* The kernel's clock where it answers this flavour of fine read (NULL: the
 * line does, or the slow path decides): one load, the reads' first test. */
FC_INLINE int (*fc_kernel_route(int ordered))(clockid_t, struct timespec *)
{
    return atomic_load_explicit(ordered ? &fc_latch.kernel_ordered : &fc_latch.kernel_direct, memory_order_relaxed);
}

FC_INLINE int64_t fc_line_offset(const struct fc_line *l, enum fc_kind kind)
{
    switch (kind) {
    case FC_REAL: return FC_LOAD(&l->real_offset);
    case FC_BOOT: return FC_LOAD(&l->boot_offset);
    case FC_TAI: return FC_LOAD(&l->tai_offset);
    default: return 0;
    }
}

/* What a reader takes from a line, loaded inside its seqlock window. */
struct fc_line_view {
    uint64_t base, span, c;
    int64_t mult, base_ns, off;
};

FC_INLINE void fc_line_view_load(const struct fc_line *l, enum fc_kind kind, struct fc_line_view *v)
{
    v->span = FC_LOAD(&l->fast_span);
    v->base = FC_LOAD(&l->base_tsc);
    v->mult = FC_LOAD(&l->mult);
    v->base_ns = FC_LOAD(&l->base_ns);
    v->c = FC_LOAD(&l->frac_c);
    v->off = fc_line_offset(l, kind);
}

/* MONOTONIC at counter t, without the kind's offset.  Exact: t - base <
 * span, and span is capped so (t - base) * mult + frac fits in 64 bits. */
FC_INLINE int64_t fc_line_view_mono(const struct fc_line_view *v, uint64_t t)
{
    return v->base_ns + (int64_t)((t * (uint64_t)v->mult + v->c) >> FC_SHIFT);
}

/* The same value from the counter's halves, as x86 returns them (lo in
 * eax, hi in edx).  While hi is the base's high half -- every read of a
 * line except those after it crossed a 2^32-tick boundary (one every
 * ~1.7 s at 2.5 GHz) -- t * mult + c = lo * mult + ((hi << 32) * mult + c)
 * mod 2^64, and the bracket is the same for every read of the line: it is
 * computed in the counter read's shadow, which leaves imul, add, shift and
 * the base on the chain after the counter, not shl, or and those four.
 * Exact: equal to fc_line_view_mono mod 2^64, and the caller's range check
 * keeps the true sum below 2^64 (tests: LineArithmetic.*). */
FC_INLINE int64_t fc_line_view_mono_halves(const struct fc_line_view *v, uint64_t lo, uint64_t hi)
{
    if (FC_LIKELY(hi == v->base >> 32)) {
        uint64_t c_hi = v->c + (v->base & 0xffffffff00000000ull) * (uint64_t)v->mult;
        /* Opaque, or GCC factors lo * mult + base_hi * mult back into
         * (lo + base_hi) * mult, an add ahead of the multiply again. */
        __asm__("" : "+r"(c_hi));
        return v->base_ns + (int64_t)((lo * (uint64_t)v->mult + c_hi) >> FC_SHIFT);
    }
    return fc_line_view_mono(v, (hi << 32) | lo);
}

/*
 * The slot a reader of seq loads the line from, chosen by a branch, not by
 * arithmetic on seq.  The branch is predicted (seq changes once per
 * publication), so on x86 the line's loads wait for the latch's address
 * only, not for seq's load as well; and a fenced counter read waits for
 * every load before it.  The acquire load of seq orders the line's loads
 * after it either way (on arm64 it holds them back regardless: no gain).
 * Measured on an Intel guest: ~1.2 ns less per ordered read, ~0.7 ns per
 * unordered one (README, Measured).
 * Volatile, or the compiler turns the branch back into arithmetic (or a
 * cmov, which waits for seq too); each arm also gives the fields one base
 * register (else GCC hoists a pointer per field and spills registers).
 */
FC_INLINE const struct fc_line *fc_latch_slot(const struct fc_latch *latch, uint64_t seq)
{
    const struct fc_line *l;
    if (seq & 1) {
        l = &latch->line[1];
        __asm__ __volatile__("" : "+r"(l));
    } else {
        l = &latch->line[0];
        __asm__ __volatile__("" : "+r"(l));
    }
    return l;
}

/*
 * The read path: the global line, now.  Returns 0 when the line cannot
 * answer (none yet, routed elsewhere, or run out): the caller's slow path
 * decides.  No stores, no calls, no loops but the seqlock retry.
 *
 * The counter is read between the two loads of seq, so a value computed from
 * line k was sampled before line k+1 became visible (up to the CPU's
 * speculation window for unordered reads, which the writer's pivot rule in
 * calibration.c covers).  Ordered reads fence the counter read behind every
 * earlier load: behind the seq load, and behind whatever the caller did to
 * synchronise with another thread -- the cross-thread guarantee.
 *
 * After an unordered read: combine edx:eax, one 64-bit multiply, an add, a
 * shift and the base -- the compare against fast_span runs beside them.
 * After an ordered (x86) read, the chain the next fenced read waits for is
 * shorter: multiply the low half, add the line's bracket for this high half
 * (computed in the counter read's shadow), shift, add the base
 * (fc_line_view_mono_halves); the combine feeds only the span compare.
 */
FC_INLINE int fc_line_read(const struct fc_latch *latch, enum fc_kind kind, int ordered, int64_t *out)
{
    uint64_t seq, t;
#if FC_COUNTER_HALVES
    uint64_t lo, hi;
#endif
    struct fc_line_view v;
    do {
        seq = atomic_load_explicit(&latch->seq, memory_order_acquire);
        const struct fc_line *l = fc_latch_slot(latch, seq);
        uint32_t flags = ordered ? FC_LOAD(&latch->read_flags) : 0;
        fc_line_view_load(l, kind, &v);
        if (FC_UNLIKELY(v.span == 0 || (flags & FC_READ_ORDERED_KERNEL)))
            return 0;
#if FC_COUNTER_HALVES
        if (ordered)
            fc_counter_fenced_halves(flags, &lo, &hi);
        else
#endif
            t = ordered ? fc_counter_fenced(flags) : fc_counter_unordered();
        atomic_thread_fence(memory_order_acquire);
    } while (FC_UNLIKELY(seq != atomic_load_explicit(&latch->seq, memory_order_relaxed)));
#if FC_COUNTER_HALVES
    /* Ordered reads only: the next fenced read waits for this one's chain.
     * An unordered read's cost is the counter's throughput, which the fold's
     * extra instructions would only add to. */
    if (ordered) {
        /* No instruction: the line's fields pass through here after the
         * counter read, so the compiler computes the bracket behind it, in
         * its shadow, and not ahead of it, where the fence would wait for it. */
        __asm__("" : "+r"(v.base), "+r"(v.mult) : "r"(hi));
        t = (hi << 32) | lo;
    }
#endif
    if (FC_UNLIKELY(t - v.base >= v.span))
        return 0;
#if FC_COUNTER_HALVES
    if (ordered) {
        *out = fc_line_view_mono_halves(&v, lo, hi) + v.off;
        return 1;
    }
#endif
    *out = fc_line_view_mono(&v, t) + v.off;
    return 1;
}

/* A per-CPU line (tsc-percpu), with the counter read inside the seqlock
 * window as in fc_line_read.  The caller chose the latch from the CPU it
 * expects to run on; `counter` (rdtscp, or the test seam's) reports in *aux
 * the CPU whose counter it read, which the caller compares with that
 * choice.  Loading the line before the counter read, not after it as the
 * CPU number would otherwise demand, keeps the slot's and the line's loads
 * off the chain that the next fenced read waits for.  Returns 0 when the
 * line cannot answer at that count; *aux is set either way. */
FC_INLINE int fc_line_read_counted(const struct fc_latch *latch, enum fc_kind kind, uint64_t (*counter)(uint32_t *),
                                   uint32_t *aux, int64_t *mono, int64_t *offset)
{
    uint64_t seq, t;
    struct fc_line_view v;
    do {
        seq = atomic_load_explicit(&latch->seq, memory_order_acquire);
        fc_line_view_load(fc_latch_slot(latch, seq), kind, &v);
        t = counter(aux);
        atomic_thread_fence(memory_order_acquire);
    } while (FC_UNLIKELY(seq != atomic_load_explicit(&latch->seq, memory_order_relaxed)));
    if (FC_UNLIKELY(t - v.base >= v.span))
        return 0;
    *mono = fc_line_view_mono(&v, t);
    *offset = v.off;
    return 1;
}

/* The line's fractional base, recovered from frac_c (exact: it is < 2^32). */
FC_INLINE uint64_t fc_line_base_frac(const struct fc_line *l)
{
    return l->frac_c + l->base_tsc * (uint64_t)l->mult;
}

/* Evaluate a line at d = t - base_tsc ticks, for any d (negative when the
 * pivot lies ahead, or beyond fast_span): exact in 128 bits. */
FC_INLINE int64_t fc_line_eval(const struct fc_line *l, int64_t d)
{
    __int128 x = (__int128)d * l->mult + (__int128)fc_line_base_frac(l);
    return l->base_ns + (int64_t)(x >> FC_SHIFT);
}

/* Fixed-point value of a line at d: used by the writer for exact continuity. */
FC_INLINE __int128 fc_line_eval_fixed(const struct fc_line *l, int64_t d)
{
    return ((__int128)l->base_ns << FC_SHIFT) + (__int128)fc_line_base_frac(l) + (__int128)d * l->mult;
}

/* A consistent copy of a latch's current line and meta (slow paths).  With
 * counter != 0 it is called inside the same window, so a value computed from
 * this line was sampled before the next line became visible. */
FC_INLINE uint64_t fc_line_copy(const struct fc_latch *latch, struct fc_line *l, struct fc_meta *m,
                                uint64_t (*counter)(void *), void *arg, uint64_t *t)
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
        if (counter)
            *t = counter(arg);
        atomic_thread_fence(memory_order_acquire);
    } while (seq != atomic_load_explicit(&latch->seq, memory_order_relaxed));
    return seq;
}

/*
 * Publish a line (the writer of that latch, under its lock).  base_frac is
 * the fractional base in units of 2^-FC_SHIFT ns (< 2^32); fast_span is
 * capped so that the reader's 64-bit arithmetic cannot overflow.
 */
FC_INLINE void fc_line_publish(struct fc_latch *latch, const struct fc_line *in, uint64_t base_frac,
                               const struct fc_meta *m)
{
    struct fc_line l = *in;
    l.frac_c = base_frac - l.base_tsc * (uint64_t)l.mult;
    if (l.mult > 0) {
        uint64_t cap = (UINT64_MAX - ((uint64_t)1 << FC_SHIFT)) / (uint64_t)l.mult;
        if (l.fast_span > cap)
            l.fast_span = cap;
    }
    uint64_t seq = atomic_load_explicit(&latch->seq, memory_order_relaxed);
    unsigned next = (unsigned)((seq + 1) & 1);
    /* The slot written now is the one readers of seq - 1 use: its stores
     * must not become visible before the previous publication's seq store
     * (a release store orders what precedes it only).  Free on x86; on
     * arm64 a dmb ish (compilers emit the full barrier for a release fence). */
    atomic_thread_fence(memory_order_release);
    const uint64_t *src = (const uint64_t *)&l;
    uint64_t *dst = (uint64_t *)&latch->line[next];
    for (unsigned i = 0; i < sizeof l / 8; i++)
        __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
    src = (const uint64_t *)m;
    dst = (uint64_t *)&latch->meta[next];
    for (unsigned i = 0; i < sizeof *m / 8; i++)
        __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
    atomic_store_explicit(&latch->seq, seq + 1, memory_order_release);
}

/* The current slot, for its writer (under its lock: nothing else publishes). */
FC_INLINE const struct fc_line *fc_line_current(const struct fc_latch *latch)
{
    return &latch->line[atomic_load_explicit(&latch->seq, memory_order_relaxed) & 1];
}
FC_INLINE const struct fc_meta *fc_meta_current(const struct fc_latch *latch)
{
    return &latch->meta[atomic_load_explicit(&latch->seq, memory_order_relaxed) & 1];
}

#endif
