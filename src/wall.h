/*
 * The wall clocks (REALTIME, TAI) on the read path: the line's MONOTONIC
 * plus the kernel's own REALTIME - MONOTONIC offset, checked on every read.
 *
 * Why: a REALTIME step (clock_settime, a leap second, resume) changes the
 * offset, not the rate.  The calibrator thread is woken by the step, but on
 * a busy machine it may not run for a scheduler tick or more, and a lazy
 * process has no thread at all.  So every wall read asks the vDSO for
 * CLOCK_REALTIME_COARSE -- a seqlock read of kernel memory, no counter, no
 * system call -- and compares it with the value this thread last saw.  The
 * same value means no timekeeping update since, hence the same offset; a
 * new one (every tick, and every step) sends the thread to fc_wall_refresh,
 * which reads the exact offset from the coarse pair (REALTIME_COARSE minus
 * MONOTONIC_COARSE of one update).  The first read that starts after
 * clock_settime returns is therefore on the new timeline, with either
 * calibrator, in every mode: the value is the line's MONOTONIC (within the
 * reported bound) plus the kernel's exact offset.
 *
 * Cost: the coarse vDSO call, 3-7 ns beside a fenced read.  Where the
 * kernel's own fine clock reads the same counter (clocksource tsc), its
 * vDSO REALTIME is the kernel's counter read plus a seqlock and a multiply,
 * which may cost less than line + check or more, by CPU: mode tsc's ordered
 * wall reads go straight to it (fc_wall_direct) where it does, timed with
 * the first line (counter.h fc_counter_wall_kernel: until that line no line
 * value is served, and from it the choice holds; the slow path takes the
 * route, fc_wall_take_direct).  tsc-percpu takes it wherever the kernel
 * reads the counter (mode.c).  Unordered wall reads always use the line:
 * bare rdtsc + check is well under the vDSO's fenced read.
 *
 * TAI adds the kernel's TAI - UTC seconds, read at each refresh: a change of
 * that alone (adjtimex ADJ_TAI, by hand) is seen at the next tick.
 *
 * Per-thread state only (initial-exec TLS, as fc_sec_cache), so nothing
 * shared is written; async-signal-safe (see fc_wall_offset); fork keeps the
 * forking thread's cache, which stays exact.
 */
#ifndef FC_WALL_H
#define FC_WALL_H

#include "internal.h"

struct fc_wall_cache {
    int64_t coarse_real; /* REALTIME_COARSE that real_offset belongs to (INT64_MIN: none) */
    int64_t real_offset; /* REALTIME - MONOTONIC, exact */
    int64_t tai_coarse;  /* likewise for tai_offset */
    int64_t tai_offset;  /* TAI - MONOTONIC */
};
FC_HIDDEN extern __thread struct fc_wall_cache fc_wall_cache __attribute__((tls_model("initial-exec")));

/* The kernel clock the check reads: the vDSO's clock_gettime (-errno
 * convention), or the seam's kernel in tests; set by fc_wall_init. */
FC_HIDDEN extern _Atomic(fc_gettime_fn) fc_wall_kernel;
/* Ordered wall reads go here when non-NULL (the vDSO's clock_gettime and
 * gettimeofday): the kernel's clock reads the counter itself and was timed
 * cheaper with the first line, or mode tsc-percpu took it at its decision
 * (fc_wall_take_direct); or the kernel answers every read (fc_wall_to_kernel). */
FC_HIDDEN extern _Atomic(fc_gettime_fn) fc_wall_direct;
FC_HIDDEN extern _Atomic(fc_gettimeofday_fn) fc_wall_direct_tv;
/* Unordered wall reads go here when non-NULL: in tsc-percpu, where they read
 * rdtscp like the ordered ones, and the vDSO then costs less (set by
 * fc_wall_enter_percpu), and where the kernel answers every read. */
FC_HIDDEN extern _Atomic(fc_gettime_fn) fc_wall_direct_unordered;

/* At init (and when tests install a seam): which kernel clock to check. */
FC_HIDDEN void fc_wall_init(void);
/* Whether the kernel reads CLOCK_TAI (asked at the decision, or by a TAI
 * read before it): where it does not, TAI reads go to the kernel, which
 * fails them as it fails libc's. */
FC_HIDDEN int fc_wall_tai_readable(void);
/* At the decision (and again at each one: a fork child, tests' kernels): ask. */
FC_HIDDEN int fc_wall_probe_tai(void);
/* At the mode decision: the kernel's clocksource is the counter we read
 * (1), or something else (0).  Routes nothing yet: the vDSO becomes a
 * candidate for the ordered wall reads, which fc_wall_take_direct arms. */
FC_HIDDEN void fc_wall_choose(int kernel_reads_counter);
/* Ordered wall reads (REALTIME, TAI, gettimeofday) go to the vDSO from now
 * on, where fc_wall_choose made it a candidate (0: none, nothing changed).
 * Taken by the slow path where the first line's timing chose the kernel
 * (fc_counter_wall_kernel), and by tsc-percpu at its decision. */
FC_HIDDEN int fc_wall_take_direct(void);
/* The kernel answers every fine read from the decision on (mode system
 * from the start, tsc-percpu routed to it): both flavours of the wall
 * clocks go straight to k, as MONOTONIC does (clock.c route_decided). */
FC_HIDDEN void fc_wall_to_kernel(fc_gettime_fn k);
/* A fork child in a new time namespace: REALTIME - MONOTONIC changed without
 * a tick, so this thread's cached offsets (the only thread's) are dropped. */
FC_HIDDEN void fc_wall_forget_offsets(void);
/* The mode became tsc-percpu: unordered wall reads follow the ordered ones. */
FC_HIDDEN void fc_wall_enter_percpu(void);
/* Cold: the kernel updated its timekeeping since this thread last looked.
 * FC_WALL_NO_OFFSET where the kernel answers none of the clocks it would
 * take the offset from (a filter refusing REALTIME where the vDSO makes
 * the system call): no wall time can be told, and none is made up. */
#define FC_WALL_NO_OFFSET INT64_MIN
FC_HIDDEN int64_t fc_wall_refresh(enum fc_kind kind);

FC_INLINE int fc_kind_is_wall(enum fc_kind kind) { return kind == FC_REAL || kind == FC_TAI; }

/*
 * kind's offset from MONOTONIC, as the kernel has it now, in *off (returns
 * 0 where there is none: FC_WALL_NO_OFFSET), and in
 * *real_coarse the kernel's REALTIME_COARSE it was checked against (INT64_MIN
 * where none could be read: fc_wall_from_mono holds REALTIME at it).  The cache is
 * loaded coarse, offset, coarse: a signal handler that refreshed it in
 * between left either a different coarse value (refresh again) or offsets
 * that belong to the coarse value we read (fc_wall_refresh writes coarse
 * last, after invalidating it).
 */
FC_INLINE int fc_wall_offset(enum fc_kind kind, int64_t *off, int64_t *real_coarse)
{
    struct timespec ts;
    fc_gettime_fn f = atomic_load_explicit(&fc_wall_kernel, memory_order_relaxed);
    if (FC_UNLIKELY(f == 0 || f(CLOCK_REALTIME_COARSE, &ts) != 0))
        goto refresh;
    int64_t kc = fc_ts_to_ns(&ts);
    struct fc_wall_cache *c = &fc_wall_cache;
    const int64_t *coarse = kind == FC_TAI ? &c->tai_coarse : &c->coarse_real;
    int64_t c0 = *coarse;
    atomic_signal_fence(memory_order_seq_cst);
    *off = kind == FC_TAI ? c->tai_offset : c->real_offset;
    atomic_signal_fence(memory_order_seq_cst);
    if (FC_LIKELY(kc == c0 && kc == *coarse)) {
        *real_coarse = kc;
        return 1;
    }
refresh:
    *off = fc_wall_refresh(kind);
    /* The coarse value the refresh read (INT64_MIN where it could not). */
    *real_coarse = fc_wall_cache.coarse_real;
    return *off != FC_WALL_NO_OFFSET;
}

/*
 * A wall clock from MONOTONIC: the value plus the kernel's offset, and
 * REALTIME never below the kernel's REALTIME_COARSE that the offset was
 * checked against -- the value a coarse read or time() just returned.  The
 * line may lag the kernel by up to its error bound, and right after a tick
 * that would put a fine read below them (the second of time() one ahead of
 * gettimeofday's).  Both inputs only move forward between steps, so the
 * larger does too; and it is never further from the kernel.
 *
 * Except where the kernel's coarse clock is itself ahead of its fine one:
 * Linux 6.15 and later update the coarse clocks' nanoseconds only when a
 * tick accumulates time, so an adjtimex that lowers the rate (ADJ_TICK,
 * ADJ_FREQUENCY) just after a second boundary carries the second over and
 * leaves both coarse clocks about a second ahead until the next tick
 * (measured on 6.18: +997 ms, every time the change is so placed).  Their
 * difference, the offset, stays exact; the floor would carry the jump into
 * every fine read.  So a coarse value further ahead than any lag of ours
 * (FC_WALL_FLOOR_MAX_NS: error bounds are microseconds, milliseconds right
 * after a rate change) is not a floor.
 */
#define FC_WALL_FLOOR_MAX_NS 100000000LL
FC_INLINE int fc_wall_from_mono(enum fc_kind kind, int64_t mono, int64_t *out)
{
    int64_t coarse, off;
    if (FC_UNLIKELY(!fc_wall_offset(kind, &off, &coarse)))
        return 0;
    int64_t v = mono + off;
    if (kind == FC_REAL && FC_UNLIKELY(v < coarse) && coarse - v < FC_WALL_FLOOR_MAX_NS)
        v = coarse;
    *out = v;
    return 1;
}

/* Ordered wall reads that the kernel answers (NULL: the line does). */
FC_INLINE fc_gettime_fn fc_wall_route(enum fc_kind kind, int ordered)
{
    if (!fc_kind_is_wall(kind))
        return 0;
    return atomic_load_explicit(ordered ? &fc_wall_direct : &fc_wall_direct_unordered, memory_order_relaxed);
}

/* The global line's answer for any kind (0: it cannot answer). */
FC_INLINE int fc_read_line(enum fc_kind kind, int ordered, int64_t *out)
{
    if (!fc_kind_is_wall(kind))
        return fc_line_read(&fc_latch, kind, ordered, out);
    int64_t mono;
    if (FC_UNLIKELY(!fc_line_read(&fc_latch, FC_MONO, ordered, &mono)))
        return 0;
    /* The kernel's REALTIME timed cheaper with this line (loaded after its
     * seq, which was published after the choice): the slow path routes. */
    if (ordered && FC_UNLIKELY(FC_LOAD(&fc_counter_wall_kernel)))
        return 0;
    return fc_wall_from_mono(kind, mono, out); /* 0: no offset, the slow path's kernel answers */
}

#endif
