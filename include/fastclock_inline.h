/*
 * fastclock_inline.h: the clocks as inline code, for C and C++ callers for
 * whom even a function call is too much.  The coarse clocks are two loads
 * from memory (~1.4 ns less than their call here); the fine MONOTONIC clocks
 * are the library's own fast path, compiled into the caller: no call, no PLT.
 *
 * Same values and guarantees as the functions of fastclock.h that they name:
 * fastclock_mono_ns_inline() is fastclock_mono_ns() (ordered: a read that
 * happens after another, in any thread, never returns less), and
 * fastclock_mono_ns_unordered_inline() is fastclock_mono_ns_unordered()
 * (monotonic within a thread).  The inline code answers only where the
 * function would answer from the same line with the same arithmetic, and
 * calls the function everywhere else: each line the library cannot serve
 * from -- mode system, tsc-percpu, before the mode decision, injected test
 * counters, a line that has run out, ordered reads routed to the kernel,
 * every read routed there (a counter dearer than the kernel's clock) --
 * has fast_span 0, fails the span check, or (ordered reads only) has a
 * read flag set that the inline code does not know; where the kernel
 * answers every read, both reads call its clock themselves (kernel_gettime
 * below).  The unordered inline read never loads the flags: a library
 * that must keep unordered reads off a line does it with fast_span 0 or
 * kernel_gettime, which binaries built with this header follow.  The coarse clocks come from memory a
 * calibrator thread publishes while it ticks them (every ~1 ms); otherwise
 * the function is called, which reads the kernel's coarse clocks.  The fine
 * inline reads are x86-64 code; elsewhere they call the functions.
 *
 * ABI: the library exports fastclock_coarse_v1, a constant pointer to a block
 * whose first two 64-bit words are the published MONOTONIC and REALTIME
 * values (MONOTONIC 0: nobody ticks) and whose fourth is the kernel's clock
 * where nobody will tick (struct fastclock_coarse_block_v1), and
 * fastclock_line_v1, a constant pointer to the global line's latch as
 * struct fastclock_line_block_v1 describes it (the library checks its own
 * layouts against both structs when it is compiled).  A later layout gets a new name; these stay as long as the
 * library's major version does.  A library whose line no longer has this
 * layout keeps exporting fastclock_line_v1, pointing at a latch whose lines
 * have fast_span 0, so programs built against this header call the function.
 */
#ifndef FASTCLOCK_INLINE_H
#define FASTCLOCK_INLINE_H

#include "fastclock.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The reads below are inline by contract, not by the compiler's choice: at
 * -O2 GCC called fastclock_mono_ns_inline() as an out-of-line copy from a
 * loop that used it twice (fastclock bench: 16.2 ns against the library
 * function's 15.4).  Their rare paths stay plain inline. */
#if !defined(__GNUC__) && !defined(__clang__)
#error "fastclock_inline.h needs GCC or Clang (__atomic builtins, inline asm): call fastclock.h's functions instead"
#endif
#define FASTCLOCK_INLINE_V1_ static inline __attribute__((always_inline))

struct fastclock_coarse_block_v1 {
    int64_t mono; /* CLOCK_MONOTONIC ns, 0 while nobody ticks */
    int64_t real; /* CLOCK_REALTIME ns, valid while mono != 0 */
    int64_t reserved; /* the library's */
    /* Non-NULL where nobody ticks and nobody did (mode system, the lazy
     * calibrator): the kernel's clock_gettime, which the functions call for
     * the _COARSE clocks then. */
    int (*kernel_gettime)(clockid_t, struct timespec *);
};
extern const struct fastclock_coarse_block_v1 *const fastclock_coarse_v1;

/* The header's own (a trailing underscore: not the library's API).  Nobody
 * ticks: the kernel's coarse clock, one call, as libc's would be (through
 * the function it cost a PLT jump and the function's own loads more);
 * else the function. */
static inline int64_t fastclock_coarse_fallback_v1_(clockid_t id, int64_t (*fn)(void))
{
    int (*kernel)(clockid_t, struct timespec *) =
        __atomic_load_n(&fastclock_coarse_v1->kernel_gettime, __ATOMIC_RELAXED);
    struct timespec ts;
    if (kernel != 0 && kernel(id, &ts) == 0)
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    return fn();
}

/* Coarse MONOTONIC and REALTIME, as fastclock_mono_coarse_ns() and
 * fastclock_real_coarse_ns(). */
FASTCLOCK_INLINE_V1_ int64_t fastclock_mono_coarse_ns_inline(void)
{
    int64_t v = __atomic_load_n(&fastclock_coarse_v1->mono, __ATOMIC_ACQUIRE);
    return __builtin_expect(v != 0, 1) ? v : fastclock_coarse_fallback_v1_(CLOCK_MONOTONIC_COARSE, fastclock_mono_coarse_ns);
}

FASTCLOCK_INLINE_V1_ int64_t fastclock_real_coarse_ns_inline(void)
{
    const struct fastclock_coarse_block_v1 *b = fastclock_coarse_v1;
    if (__builtin_expect(__atomic_load_n(&b->mono, __ATOMIC_ACQUIRE) != 0, 1))
        return __atomic_load_n(&b->real, __ATOMIC_RELAXED);
    return fastclock_coarse_fallback_v1_(CLOCK_REALTIME_COARSE, fastclock_real_coarse_ns);
}

/* One line: CLOCK_MONOTONIC at counter t, for t - base_tsc < fast_span, is
 * base_ns + ((t * mult + frac_c) mod 2^64) / 2^32, in 64-bit unsigned
 * arithmetic.  64 bytes. */
struct fastclock_line_slot_v1 {
    uint64_t base_tsc;    /* the counter at the line's base */
    uint64_t fast_span;   /* answers only for t - base_tsc < fast_span; 0: never */
    int64_t mult;         /* ns per tick, times 2^32 */
    int64_t base_ns;      /* MONOTONIC at base_tsc, integer ns */
    uint64_t frac_c;      /* the fraction at base_tsc minus base_tsc * mult, mod 2^64 */
    uint64_t reserved[3]; /* the library's */
};

/* The global line's latch: seq counts publications, the line to read is
 * line[seq & 1], and a read is good if seq has not changed after it. */
struct fastclock_line_block_v1 {
    uint64_t seq;          /* loaded with acquire order, and again after the counter read */
    uint32_t read_flags;   /* ordered reads: bit 0 rdtscp, else lfence;rdtsc; any other bit: call the function */
    uint32_t reserved0;    /* the library's */
    /* Non-NULL where the kernel answers every fine read (mode system decided
     * at start-up, tsc-percpu where the kernel's clock is the cheaper read,
     * a counter dearer than the kernel's clock): its clock_gettime, to call
     * as the function would; or, in tsc-percpu, the library's own entry to
     * its per-CPU lines, called the same way. */
    int (*kernel_gettime)(clockid_t, struct timespec *);
    uint64_t reserved1[5]; /* the library's */
    struct fastclock_line_slot_v1 line[2];
};
/* The global line's latch, for the reads below (the ABI note above). */
extern const struct fastclock_line_block_v1 *const fastclock_line_v1;

#if defined(__x86_64__)
/* The header's own.  The slot a reader of seq uses, by a predicted branch,
 * not arithmetic on seq: on x86 the line's loads then wait for no load of
 * seq, and the fenced counter read waits for them (the library's read does
 * the same: ~1 ns less per read on an Intel guest, measured).  Volatile, or the compiler
 * makes the branch arithmetic again. */
FASTCLOCK_INLINE_V1_ const struct fastclock_line_slot_v1 *fastclock_line_slot_v1_(const struct fastclock_line_block_v1 *b,
                                                                          uint64_t seq)
{
    const struct fastclock_line_slot_v1 *l;
    if (seq & 1) {
        l = &b->line[1];
        __asm__ __volatile__("" : "+r"(l));
    } else {
        l = &b->line[0];
        __asm__ __volatile__("" : "+r"(l));
    }
    return l;
}

/* The header's own (a trailing underscore: not the library's API).  Where
 * the line cannot answer: in mode system the kernel's clock, one call, as
 * libc's would be (through the function it cost a PLT jump and the
 * function's own checks more); else the function. */
static inline int64_t fastclock_line_fallback_v1_(const struct fastclock_line_block_v1 *b, int64_t (*fn)(void))
{
    int (*kernel)(clockid_t, struct timespec *) = __atomic_load_n(&b->kernel_gettime, __ATOMIC_RELAXED);
    struct timespec ts;
    if (kernel != 0 && kernel(CLOCK_MONOTONIC, &ts) == 0)
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    return fn();
}
#endif

/* CLOCK_MONOTONIC in ns, as fastclock_mono_ns(): the counter read is fenced
 * (rdtscp, or lfence;rdtsc) behind every earlier load, so it is ordered
 * after whatever the caller did to synchronise with another thread. */
FASTCLOCK_INLINE_V1_ int64_t fastclock_mono_ns_inline(void)
{
#if defined(__x86_64__)
    const struct fastclock_line_block_v1 *b = fastclock_line_v1;
    uint64_t seq, base, span, c, lo, hi, t;
    int64_t mult, base_ns;
    uint32_t flags;
    /* Where the kernel answers every read (mode system, above all): its
     * clock, decided by one load that waits for nothing (tested after the
     * line's loads, the kernel's fenced read waited for them). */
    if (__builtin_expect(__atomic_load_n(&b->kernel_gettime, __ATOMIC_RELAXED) != 0, 0))
        goto call;
    do {
        seq = __atomic_load_n(&b->seq, __ATOMIC_ACQUIRE);
        const struct fastclock_line_slot_v1 *l = fastclock_line_slot_v1_(b, seq);
        /* The line's answer or not first: where it has none, the
         * function follows without loading the rest. */
        flags = __atomic_load_n(&b->read_flags, __ATOMIC_RELAXED);
        span = __atomic_load_n(&l->fast_span, __ATOMIC_RELAXED);
        if (__builtin_expect(span == 0 || (flags & ~1u) != 0, 0))
            goto call;
        base = __atomic_load_n(&l->base_tsc, __ATOMIC_RELAXED);
        mult = __atomic_load_n(&l->mult, __ATOMIC_RELAXED);
        base_ns = __atomic_load_n(&l->base_ns, __ATOMIC_RELAXED);
        c = __atomic_load_n(&l->frac_c, __ATOMIC_RELAXED);
        if (flags & 1u) {
            uint64_t aux;
            __asm__ __volatile__("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux) :: "memory");
            (void)aux;
        } else {
            __asm__ __volatile__("lfence\n\trdtsc" : "=a"(lo), "=d"(hi) :: "memory");
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
    } while (__builtin_expect(seq != __atomic_load_n(&b->seq, __ATOMIC_RELAXED), 0));
    /* The line's fields pass through here after the counter read, so the
     * bracket below is computed in its shadow, not ahead of the fence. */
    __asm__("" : "+r"(base), "+r"(mult) : "r"(hi));
    t = (hi << 32) | lo;
    if (__builtin_expect(t - base >= span, 0))
        goto call;
    if (__builtin_expect(hi == base >> 32, 1)) {
        /* The low half times mult plus this high half's bracket: the same
         * sum mod 2^64, one multiply after the counter read.  Opaque, or
         * the compiler factors the add back ahead of the multiply. */
        uint64_t c_hi = c + (base & 0xffffffff00000000ull) * (uint64_t)mult;
        __asm__("" : "+r"(c_hi));
        return base_ns + (int64_t)((lo * (uint64_t)mult + c_hi) >> 32);
    }
    return base_ns + (int64_t)((t * (uint64_t)mult + c) >> 32);
call:
    return fastclock_line_fallback_v1_(b, fastclock_mono_ns);
#endif
    return fastclock_mono_ns();
}

/* CLOCK_MONOTONIC in ns, as fastclock_mono_ns_unordered(): a bare rdtsc,
 * monotonic within a thread. */
FASTCLOCK_INLINE_V1_ int64_t fastclock_mono_ns_unordered_inline(void)
{
#if defined(__x86_64__)
    const struct fastclock_line_block_v1 *b = fastclock_line_v1;
    uint64_t seq, base, span, c, t;
    int64_t mult, base_ns;
    unsigned long lo, hi; /* register-wide: rdtsc clears rax's and rdx's upper halves */
    if (__builtin_expect(__atomic_load_n(&b->kernel_gettime, __ATOMIC_RELAXED) != 0, 0))
        goto call; /* the kernel answers every read, as above */
    do {
        seq = __atomic_load_n(&b->seq, __ATOMIC_ACQUIRE);
        const struct fastclock_line_slot_v1 *l = fastclock_line_slot_v1_(b, seq);
        span = __atomic_load_n(&l->fast_span, __ATOMIC_RELAXED);
        if (__builtin_expect(span == 0, 0))
            goto call;
        base = __atomic_load_n(&l->base_tsc, __ATOMIC_RELAXED);
        mult = __atomic_load_n(&l->mult, __ATOMIC_RELAXED);
        base_ns = __atomic_load_n(&l->base_ns, __ATOMIC_RELAXED);
        c = __atomic_load_n(&l->frac_c, __ATOMIC_RELAXED);
        __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi) :: "memory");
        t = ((uint64_t)hi << 32) | lo;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
    } while (__builtin_expect(seq != __atomic_load_n(&b->seq, __ATOMIC_RELAXED), 0));
    if (__builtin_expect(t - base >= span, 0))
        goto call;
    return base_ns + (int64_t)((t * (uint64_t)mult + c) >> 32);
call:
    return fastclock_line_fallback_v1_(b, fastclock_mono_ns_unordered);
#endif
    return fastclock_mono_ns_unordered();
}

#ifdef __cplusplus
}
#endif

#endif /* FASTCLOCK_INLINE_H */
