/*
 * The public clocks.
 *
 * Fast path (mode tsc, line current): a load of the kernel route (NULL
 * here), then fc_line_read (line.h) -- two loads of seq, six loads from one
 * cache line, the fenced (or bare) counter read, one 64-bit multiply after
 * it (line.h).  No locks, no syscalls, no stores (the out-of-line paths
 * store a route once, when it is taken).  Everything else goes
 * through an out-of-line path, itself lock-free and async-signal-safe:
 *   - mode system decided at start-up, or a counter dearer than the kernel's
 *     clock: straight to the vDSO, decided by that first load
 *     (fc_kernel_route; fc_read);
 *   - first use, line due or expired, tsc-percpu, injected test counters,
 *     a fail-safe switch at run time: fc_slow_read.
 *
 * Guarantees, per flavour (tests/guarantees_test.cc proves each):
 *   ordered (fastclock_mono_ns, _real_ns, fastclock_gettime): a read that
 *     happens after another read (same thread, or ordered by a lock, an
 *     atomic, a fork) never returns a smaller MONOTONIC value, in every mode
 *     but tsc-percpu on its own lines, where across threads (not within
 *     one) it may by up to the reported error bound (fastclock.h);
 *   unordered (*_unordered): monotonic within a thread; across threads a
 *     read may come out earlier than one that happened before it by up to
 *     the CPU's out-of-order window around the counter read (measured on an
 *     AMD EPYC KVM guest: through a mutex usually 0-20 ns, rarely up to
 *     ~1.5 us -- 952 ns in 1 of 60 local runs of 2 M reads, 1443 ns once in
 *     CI -- while ordered reads in the same runs never went back; up to
 *     186 ns through a lock-free atomic hand-off in a JVM);
 *   coarse: MONOTONIC monotonic across threads, never ahead of the fine
 *     clock where the ticker publishes it (see mixing flavours; in
 *     tsc-percpu, whose ticker reads its own CPU's line, by at most the
 *     error bound, the mode's cross-thread guarantee) -- until
 *     its first tick the fine clock answers, and the tick publishes no less
 *     than anything served before it (upkeep.c's hand-over; after the
 *     thread starts again, no less than the kernel's coarse clock then,
 *     which may be ahead of the fine clock by its error bound); REALTIME is
 *     the ticker's last value, so a clock_settime reaches
 *     it at the next tick (until then it may be ahead of a fine read after
 *     a step back); both behind the fine clocks by ~1 ms plus the ticker
 *     thread's scheduling delay
 *     (ticker: 0.6 ms median, up to ~200 ms on a 2-vCPU guest with 16
 *     spinning threads) or about one kernel tick (no ticker: the vDSO's,
 *     4.7 ms median, 6.7 ms worst here, load or not);
 *   wall clocks (REALTIME, TAI): the MONOTONIC value of the same read plus
 *     the kernel's exact offset, checked on every read (wall.h), so the
 *     first read that starts after clock_settime returns is on the new
 *     timeline, in every mode, with either calibrator; ordered wall reads
 *     are the vDSO's own where the kernel's clocksource is the TSC and its
 *     REALTIME was timed cheaper than the line's (counter.c, with the
 *     first line: mode tsc) or in tsc-percpu, and
 *     both flavours where the kernel answers every fine read from the
 *     start (mode system, tsc-percpu routed to it), and in tsc-percpu
 *     where the kernel's clock reads in user space (mode.c
 *     choose_percpu_wall; after a switch from tsc, once the kernel has
 *     passed the switch floor: percpu_wall_read);
 *   BOOTTIME: the MONOTONIC value of the same read plus one offset that
 *     every line carries and only a suspend raises (calibration.c), so it
 *     keeps MONOTONIC's guarantees; where the kernel answers after reads
 *     were served from a line, it is held to the same floors as MONOTONIC
 *     (where it answered a flavour all along -- the ordered kernel route,
 *     mode system from the start -- there is nothing to hold);
 *   mixing flavours of one clock in a thread: between REALTIME steps, a
 *     fine REALTIME read after the kernel's coarse REALTIME (a coarse read
 *     without a ticker, time()) is never earlier (fc_wall_from_mono holds
 *     it at that value) -- unless that coarse value lies 100 ms or more
 *     above the fine one (the kernel's coarse clocks a second ahead, a
 *     Linux 6.15+ fault after a rate drop, wall.h), which is no floor;
 *     after the ticker's coarse REALTIME, which is the
 *     ordered fine clock's, an unordered fine read may be earlier by at
 *     most the error bound where the ordered one is the vDSO's; a fine
 *     MONOTONIC read after a coarse one is
 *     never earlier where the ticker publishes the coarse clocks from the
 *     line, or where the kernel answers both (mode system); where the
 *     kernel's coarse clocks answer and the line the fine ones (no ticker:
 *     the shim, lazy processes) it may be earlier by at most the reported
 *     error bound (the line may lag the kernel that much, and the kernel's
 *     coarse value is its time at the last tick); ordered and
 *     unordered reads of one line agree to the ns except where the ordered
 *     flavour is routed to a cheaper kernel clock -- then they differ by
 *     at most the error bound.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "fastclock_inline.h" /* the types of the two pointers it reads through */

#include "calibration.h"
#include "mode.h"
#include "percpu.h"
#include "sync.h"
#include "upkeep.h"
#include "wall.h"

#define FC_API __attribute__((visibility("default")))
#define FC_COLD __attribute__((noinline, cold))

/* fastclock_inline.h's view of it (mono and real first, as the block there
 * says): a pointer, so a copy relocation in a non-PIE program copies the
 * address, never the block itself. */
FC_API const struct fastclock_coarse_block_v1 *const fastclock_coarse_v1 =
    (const struct fastclock_coarse_block_v1 *)(const void *)&fc_coarse;
/* And its view of the global line (struct fastclock_line_block_v1, checked
 * against struct fc_latch in line.c), a pointer for the same reason. */
FC_API const struct fastclock_line_block_v1 *const fastclock_line_v1 =
    (const struct fastclock_line_block_v1 *)(const void *)&fc_latch;
__thread struct fc_sec_cache fc_sec_cache[FC_TAI + 1] __attribute__((tls_model("initial-exec")));

__attribute__((noinline)) int64_t fc_new_second(enum fc_kind kind, int64_t ns)
{
    int64_t sec = ns / FC_NS_PER_SEC - (ns % FC_NS_PER_SEC < 0);
    struct fc_sec_cache *c = &fc_sec_cache[kind];
    /* A signal handler between the two stores may leave a torn pair: the
     * reader checks that the pair belongs together (clock.h). */
    c->sec = sec;
    c->sec_ns = (int64_t)((uint64_t)sec * (uint64_t)FC_NS_PER_SEC);
    return sec;
}
static _Atomic uint64_t fallback_reads;

/* ---------------------------------------------------------------- before the decision */

/*
 * Until the mode is decided, the kernel answers every read directly, and the
 * decision waits until the process has shown it reads the time often: the
 * calibrator thread decides a millisecond after the first read; without one,
 * the thread that makes its DEFER_READS-th read decides.  A process that
 * reads the time a few times (date, a shell tool) never pays for a decision
 * (CPUIDs and a sysfs read trap in a VM: 30-80 us there), and never costs
 * more than libc.
 *
 * fc_direct_gettime is this file's routing pointer: the wrapper below until
 * the decision; then NULL (the line answers), or the kernel's clock itself
 * where mode system was decided at start-up (mode.c fc_system_from_start:
 * nothing was ever served from the counter, so the kernel answers
 * unclamped).  The first read after the decision swaps it.
 */
#define DEFER_READS 32
static int deferred_gettime(clockid_t id, struct timespec *ts);
static int deciding_gettime(clockid_t id, struct timespec *ts);
static _Atomic(fc_direct_fn) fc_direct_gettime = deferred_gettime;
static _Atomic int read_before_decision;
static __thread uint32_t deferred_reads __attribute__((tls_model("initial-exec")));

static enum fc_kind kind_of(clockid_t id)
{
    switch (id) {
    case CLOCK_REALTIME: case CLOCK_REALTIME_COARSE: return FC_REAL;
    case CLOCK_BOOTTIME: return FC_BOOT;
    case CLOCK_TAI: return FC_TAI;
    default: return FC_MONO;
    }
}

/* The reads' first test from now on (fc_read, fastclock_inline.h's): the
 * ordered fine reads, and every one if `every_read`, go straight to k.  Each
 * pointer stored only if it differs: they share the cache line every reader
 * loads first. */
static void take_kernel_route(fc_direct_fn k, int every_read)
{
    if (atomic_load_explicit(&fc_latch.kernel_ordered, memory_order_relaxed) != k)
        atomic_store_explicit(&fc_latch.kernel_ordered, k, memory_order_relaxed);
    if (every_read && atomic_load_explicit(&fc_latch.kernel_direct, memory_order_relaxed) != k)
        atomic_store_explicit(&fc_latch.kernel_direct, k, memory_order_relaxed);
}

/* The decision is made: route reads as it says (from whichever wrapper
 * routes them now), and return where they now go. */
static fc_direct_fn route_decided(void)
{
    fc_direct_fn next = 0;
    if (fc_kernel_from_start()) {
        next = fc_refclock_answering();
        /* Mode system: no ticker will serve the coarse clocks, and none ever
         * did: the kernel's, one jump away (upkeep.h).  (tsc-percpu's ticker
         * serves them from memory.) */
        if (fc_system_from_start() && fc_coarse_floor() == 0)
            atomic_store_explicit(&fc_coarse.direct, next, memory_order_relaxed);
        fc_wall_to_kernel(next);
        take_kernel_route(next, 1);
    }
    fc_direct_fn expected = atomic_load_explicit(&fc_direct_gettime, memory_order_acquire);
    if (expected == deferred_gettime || expected == deciding_gettime)
        atomic_compare_exchange_strong_explicit(&fc_direct_gettime, &expected, next, memory_order_acq_rel,
                                                memory_order_acquire);
    return next;
}

static int kernel_if_refused(clockid_t id, struct timespec *ts, int64_t ns);

/* kernel_if_refused in the direct routes' convention (-errno). */
static FC_COLD int stored_or_refused(clockid_t id, struct timespec *ts, int64_t ns)
{
    return kernel_if_refused(id, ts, ns) == 0 ? 0 : -errno;
}

/* The first read through the wrapper after the decision: answer it as the
 * decision says. */
static FC_COLD int decided_gettime(clockid_t id, struct timespec *ts)
{
    fc_direct_fn next = route_decided();
    if (next)
        return next(id, ts);
    if (id == CLOCK_MONOTONIC_COARSE || id == CLOCK_REALTIME_COARSE)
        return stored_or_refused(id, ts, id == CLOCK_MONOTONIC_COARSE ? fastclock_mono_coarse_ns()
                                                                      : fastclock_real_coarse_ns());
    return stored_or_refused(id, ts, fc_slow_read(kind_of(id), 1));
}

static int deferred_gettime(clockid_t id, struct timespec *ts)
{
    /* seq first: a counter's line published before this load was published
     * after the mode left "undecided" (the first line follows the decision), so the
     * mode's load below sees that; one published after it shows in seq's
     * second load.  The other way round, a reader preempted between the
     * two loads could hand out a kernel value, unnoted, above a line
     * published meanwhile. */
    uint64_t seq = atomic_load_explicit(&fc_latch.seq, memory_order_acquire);
    int mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
    if (FC_UNLIKELY(mode != FC_MODE_UNINIT && mode != FC_MODE_INITIALIZING))
        return decided_gettime(id, ts);
    int r = fc_kernel_gettime(id, ts);
    if (FC_UNLIKELY(!atomic_load_explicit(&read_before_decision, memory_order_relaxed))) {
        atomic_store_explicit(&read_before_decision, 1, memory_order_relaxed);
        fc_upkeep_wake(); /* it decides a millisecond from now */
    }
    if (FC_UNLIKELY(++deferred_reads >= DEFER_READS) && !fc_upkeep_running() &&
        atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_UNINIT)
        fc_try_init();
    /* A line published while we read: this value may lie above it, so
     * read again through the slow path (which never undercuts a line).  So
     * too where the mode was decided meanwhile: its first line may be built
     * already and published only after the seq check below, and this value,
     * handed out unnoted, could then lie above it. */
    int decided_now = atomic_load_explicit(&fc_mode, memory_order_acquire);
    if (FC_UNLIKELY(atomic_load_explicit(&fc_latch.seq, memory_order_acquire) != seq ||
                    (decided_now != FC_MODE_UNINIT && decided_now != FC_MODE_INITIALIZING)) &&
        id != CLOCK_MONOTONIC_COARSE && id != CLOCK_REALTIME_COARSE)
        return stored_or_refused(id, ts, fc_slow_read(kind_of(id), 1));
    return r == 0 ? 0 : -errno;
}

/* Tests (fc_clock_reset_for_tests) decide at the first read, with their
 * seam in place; from then on reads go as the decision says. */
static int deciding_gettime(clockid_t id, struct timespec *ts)
{
    if (atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_UNINIT)
        fc_try_init();
    return deferred_gettime(id, ts);
}

int fc_decision_wanted(void)
{
    return atomic_load_explicit(&read_before_decision, memory_order_relaxed);
}

void fc_clock_reset_for_tests(void)
{
    atomic_store(&fc_direct_gettime, deciding_gettime);
    atomic_store(&read_before_decision, 0);
    deferred_reads = 0;
    atomic_store(&fallback_reads, 0);
}

/* ---------------------------------------------------------------- fast path */

/* Mode system from the start: the vDSO answers, as it would through libc.
 * A kernel that refuses (a seccomp filter, where there is no vDSO) wrote
 * nothing: 0, as fc_kernel_ns gives, not the stack's leftovers. */
FC_INLINE int64_t direct_ns(fc_direct_fn f, clockid_t id)
{
    struct timespec ts;
    if (FC_UNLIKELY(f(id, &ts) != 0))
        return 0;
    return fc_ts_to_ns(&ts);
}

FC_INLINE void split_ts(enum fc_kind kind, int64_t ns, struct timespec *ts)
{
    int64_t rem;
    ts->tv_sec = (time_t)fc_split_seconds(kind, ns, &rem);
    ts->tv_nsec = (long)rem;
}

/* A served clock's value of the library's into ts; its 0 (the kernel
 * refused where it answers: a filter, no vDSO) is the kernel's own answer
 * instead, -1 with errno set as libc's, not a time of 0. */
static FC_COLD int kernel_if_refused(clockid_t id, struct timespec *ts, int64_t ns)
{
    if (FC_UNLIKELY(ns == 0))
        return fc_kernel_gettime(id, ts);
    split_ts(kind_of(id), ns, ts);
    return 0;
}

static int64_t percpu_route_ns(enum fc_kind kind);
static int64_t percpu_route_mono(void);

/* Where the reads' first test sends this flavour (fc_kernel_route): the
 * kernel's clock, one call, out of line (the timespec's frame stays off the
 * line's path), or tsc-percpu's lines -- whose wall clocks the slow path
 * answers, in the read's own flavour. */
static __attribute__((noinline)) int64_t route_read(fc_direct_fn k, enum fc_kind kind, int ordered)
{
    if (k == fc_percpu_route_gettime) {
        if (FC_LIKELY(kind == FC_MONO))
            return percpu_route_mono();
        return fc_kind_is_wall(kind) ? fc_slow_read(kind, ordered) : percpu_route_ns(kind);
    }
    return direct_ns(k, fc_kind_clock(kind));
}

/* The line answers (wall clocks: plus the kernel's offset, wall.h), unless
 * the kernel's clock reads the counter itself or answers this flavour (mode
 * system from the start, an ordered read the counter costs too much for:
 * fc_kernel_route, one load from the cache line the read loads first anyway,
 * and independent of it -- tested after the line's loads, its answer waited
 * for them, and the vDSO's fence for that: 1.06-1.07x libc measured,
 * against 1.0x); else a tail jump to fc_slow_read.  Jumping, not calling the kernel from here, keeps
 * MONOTONIC's line path free of a stack frame (the timespec a kernel read
 * needs): no push, pop or stack adjustment around the counter read. */
FC_INLINE int64_t fc_read(enum fc_kind kind, int ordered)
{
    int64_t v;
    fc_gettime_fn w = fc_wall_route(kind, ordered);
    if (w != 0)
        return direct_ns(w, fc_kind_clock(kind));
    fc_direct_fn k = fc_kernel_route(ordered);
    if (FC_UNLIKELY(k != 0))
        return route_read(k, kind, ordered); /* constants: the caller's kind and flavour */
    if (FC_LIKELY(fc_read_line(kind, ordered, &v)))
        return v;
    return fc_slow_read(kind, ordered);
}

FC_API int64_t fastclock_mono_ns(void) { return fc_read(FC_MONO, 1); }
FC_API int64_t fastclock_real_ns(void) { return fc_read(FC_REAL, 1); }
FC_API int64_t fastclock_mono_ns_unordered(void) { return fc_read(FC_MONO, 0); }
FC_API int64_t fastclock_real_ns_unordered(void) { return fc_read(FC_REAL, 0); }

/* ---------------------------------------------------------------- slow path */

struct fc_full {
    struct fc_line l;
    struct fc_meta m;
    uint64_t t, seq;
};

static void snapshot_full(struct fc_full *f, int ordered)
{
    f->seq = fc_line_copy(&fc_latch, &f->l, &f->m, fc_copy_counter, (void *)(intptr_t)ordered, &f->t);
}

static int64_t line_value(const struct fc_full *f, enum fc_kind kind, int64_t d)
{
    return fc_line_eval(&f->l, d) + fc_line_offset(&f->l, kind);
}

/*
 * The kernel answers, and MONOTONIC/BOOTTIME are clamped so that nothing
 * returned earlier from the line is undercut: never below the line's value
 * at the counter read inside this snapshot (or at its end, if it ran out),
 * which is at least every value the line handed out before.  (Clamping at
 * kernel + the published bound instead undercut the line whenever the
 * kernel's rate fell after publication: tests/realkernel.)  A newer line
 * published meanwhile means retry, so every kernel value returned here
 * precedes the next line -- which starts at or above the kernel.
 */
static int fallback_read(enum fc_kind kind, const struct fc_full *f, int64_t *out)
{
    int64_t k = fc_kernel_ns(fc_kind_clock(kind));
    if (atomic_load_explicit(&fc_latch.seq, memory_order_acquire) != f->seq)
        return 0;
    if (kind == FC_MONO || kind == FC_BOOT) {
        /* This value is noted as MONOTONIC for the next line's writer
         * (below): BOOTTIME less the line's offset, never above a MONOTONIC
         * read after it.  A suspend since the line grew the kernel's offset:
         * taken off with the line's, an hour's suspend made the noted value an
         * hour ahead, and the next line was lifted over it.  Held there, this
         * read is BOOTTIME as the line gives it until the next line, whose
         * sample carries the kernel's new offset (a step forward): BOOTTIME
         * never steps back to that line, as it would from the kernel's own
         * value (the lines share one offset, raised by samples alone).
         * Before the first line of mode tsc there is no line's offset: the
         * kernel's, so the noted value is that MONOTONIC read. */
        int first = f->l.mult == 0 && atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_TSC;
        int64_t off = kind == FC_BOOT ? f->l.boot_offset : 0;
        if (kind == FC_BOOT && (first || f->l.mult != 0)) {
            int64_t mono_after = fc_kernel_ns(CLOCK_MONOTONIC);
            if (first)
                off = k - mono_after;
            else if (mono_after != 0 && k - off > mono_after)
                k = mono_after + off;
            first &= mono_after != 0; /* unreadable (an injected kernel): nothing to note */
        }
        int64_t floor, beyond, ceiling;
        uint64_t held_span = 0; /* where on the line the floor is held (0: not held on it) */
        if (f->l.mult != 0) {
            int64_t used = (int64_t)(f->t - f->l.base_tsc);
            if (used < 0) {
                /* The counter went back: no reader used the line since, and
                 * before that it was within its (grown) bound of the kernel. */
                int64_t end = line_value(f, FC_MONO, (int64_t)f->m.soft_span);
                /* (k 0: unreadable, no cap: the line's end stands.) */
                int64_t cap = k != 0 ? k - off + fc_meta_bound(&f->m, k - off) : INT64_MAX;
                floor = beyond = ceiling = end < cap ? end : cap;
            } else {
                /* Past the line's end: its value there, or (a line still
                 * being published, calibration.c's handshake) here. */
                beyond = line_value(f, FC_MONO, used);
                /* A cut (calibration.c publish_cut) may have shown only
                 * after readers had passed its end: the line may have given
                 * values up to its end before the cut, and this thread one
                 * of them -- held there, not at the cut's end (measured: a
                 * writer delayed past its guard under qemu, and a thread's
                 * next read fell 86-766 ns back to the kernel's).  Noted
                 * below, so the next line is lifted over it.  The ceiling
                 * for a fallback that meets a publication is the cut's end,
                 * which the new line is sure to cover, or further as far as
                 * its writer says it covers the old line (held_span,
                 * calibration.c fallback.covered_to). */
                uint64_t cut = f->m.soft_span;
                uint64_t end = f->m.uncut_span > cut ? f->m.uncut_span : cut;
                ceiling = line_value(f, FC_MONO, (uint64_t)used > cut ? (int64_t)cut : used);
                held_span = (uint64_t)used > end ? end : (uint64_t)used;
                floor = line_value(f, FC_MONO, (int64_t)held_span);
            }
        } else {
            floor = beyond = ceiling = f->m.floor_ns;
        }
        floor += off;
        ceiling += off;
        if (k < floor)
            k = floor;
        /* No later line may undercut this: calibration.c's handshake with
         * the line's writer says what may be returned.  Before the first
         * line of mode tsc, that line is being built from a sample already
         * taken, its rate known to ~1e-3: the value is noted all the same,
         * so the writer lifts the line above it; with no old line there is
         * no ceiling, and a writer caught mid-publication (a few
         * instructions) leaves the kernel's value standing. */
        if (f->l.mult != 0 || first) {
            int64_t v = fc_cal_fallback_value(k - off, (first ? k : ceiling) - off, first ? k - off : beyond,
                                              f->m.epoch, held_span ? &f->l : 0, held_span);
            if (v == FC_FALLBACK_RETRY)
                return 0;
            k = v + off;
        }
        if (atomic_load_explicit(&fc_latch.seq, memory_order_seq_cst) != f->seq)
            return 0;
    }
    *out = k;
    return 1;
}

static FC_COLD int64_t percpu_kernel_read(enum fc_kind kind);

/* tsc-percpu: the path mode.c chose, the kernel's clock or this CPU's line. */
static int64_t percpu_answer(enum fc_kind kind)
{
    if (FC_UNLIKELY(fc_percpu_to_kernel()))
        return percpu_kernel_read(kind);
    return fc_percpu_read(kind);
}

/*
 * The counter-cost routes (counter.c): FC_READ_ORDERED_KERNEL, the kernel's
 * clock costs under half an ordered counter read here, sends the ordered
 * reads to it; FC_READ_KERNEL, under half even a bare one (a counter that
 * traps), every fine read.  A routed flavour is the kernel's own, in every
 * mode, from the first line on.  The flags are written before that line is
 * published, so every reader that could see the line sees them -- the
 * ordered line read loads them inside its window, the slow path after its
 * snapshot, and under FC_READ_KERNEL the line's fast_span is 0, so every
 * unordered read takes the slow path -- and no routed read is ever served
 * from a line: nothing to clamp.  From the first such read on, fc_read's
 * first test sends them straight to the kernel (fc_kernel_route).
 */
FC_INLINE int routed_to_kernel(int ordered)
{
    uint32_t flags = FC_LOAD(&fc_latch.read_flags);
    return FC_UNLIKELY(flags & (ordered ? FC_READ_ORDERED_KERNEL : FC_READ_KERNEL));
}

static FC_COLD int64_t routed_kernel_read(enum fc_kind kind)
{
    fc_direct_fn k = fc_refclock_answering();
    /* The wall clocks' own route with it, where the kernel reads the counter
     * (counter.c sets fc_counter_wall_kernel with these routes): gettimeofday
     * then jumps into the vDSO's own, as libc's does. */
    if (FC_LOAD(&fc_counter_wall_kernel))
        fc_wall_take_direct();
    take_kernel_route(k, FC_LOAD(&fc_latch.read_flags) & FC_READ_KERNEL);
    return direct_ns(k, fc_kind_clock(kind));
}

/*
 * tsc-percpu's wall clocks where the kernel answers them (mode.c
 * choose_percpu_wall) but the route is not taken yet: after a switch from
 * mode tsc, whose global line may have led the kernel by its error.  Until
 * the kernel has passed the switch floor they are MONOTONIC held at the
 * floor plus the offset -- never a per-CPU line's value, which may lead the
 * kernel too -- and from then on the kernel's own, both flavours.
 */
static FC_COLD int64_t percpu_wall_read(enum fc_kind kind)
{
    fc_direct_fn k = fc_refclock_answering();
    int64_t floor = atomic_load_explicit(&fc_percpu_switch_floor, memory_order_relaxed);
    int64_t mono = direct_ns(k, CLOCK_MONOTONIC), v;
    if (mono < floor)
        return fc_wall_from_mono(kind, floor, &v) ? v : direct_ns(k, fc_kind_clock(kind));
    fc_wall_to_kernel(k);
    return direct_ns(k, fc_kind_clock(kind));
}

/* tsc-percpu, with the kernel answering its wall clocks: the mode first
 * (acquire), then the choice, which mode.c writes before the mode. */
FC_INLINE int percpu_wall_to_kernel(void)
{
    return atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_PERCPU &&
           atomic_load_explicit(&fc_percpu_wall_kernel, memory_order_relaxed);
}

/* Its one caller, fc_slow_read, has tested the routes already. */
static FC_COLD int64_t slow_read(enum fc_kind kind, int ordered)
{
    if (fc_kind_is_wall(kind)) { /* MONOTONIC, in whatever way this mode reads it, plus the offset */
        if (FC_UNLIKELY(percpu_wall_to_kernel()))
            return percpu_wall_read(kind);
        int64_t mono = slow_read(FC_MONO, ordered);
        /* The kernel's REALTIME, timed cheaper with the first line (wall.h),
         * or set with a counter-cost route: the vDSO's own entries, its
         * gettimeofday too (routed_kernel_read arms them as well).  No line
         * value was served before (wall.h fc_read_line): nothing to hold. */
        if (ordered && FC_LOAD(&fc_counter_wall_kernel) && fc_wall_take_direct())
            return direct_ns(fc_wall_route(kind, 1), fc_kind_clock(kind));
        if (routed_to_kernel(ordered)) /* the route showed meanwhile: the kernel's own wall clock */
            return routed_kernel_read(kind);
        /* This read's MONOTONIC switched to tsc-percpu (a lazy warp check):
         * not the per-CPU line's value plus the offset, but the route's. */
        if (FC_UNLIKELY(percpu_wall_to_kernel()))
            return percpu_wall_read(kind);
        int64_t v;
        if (FC_LIKELY(fc_wall_from_mono(kind, mono, &v)))
            return v;
        /* No offset (wall.h): the kernel's own clock, or its refusal's 0. */
        return fc_kernel_ns(fc_kind_clock(kind));
    }
    int polled = 0;
    for (int attempt = 0;; attempt++) {
        int mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
        if (mode == FC_MODE_UNINIT) {
            fc_try_init();
            continue;
        }
        /* Again after the mode's acquire: a mode that followed the first
         * line (tsc-percpu, system) shows its flags. */
        if (routed_to_kernel(ordered))
            return routed_kernel_read(kind);
        if (mode == FC_MODE_PERCPU)
            return percpu_answer(kind);
        struct fc_full f;
        snapshot_full(&f, ordered);
        if (routed_to_kernel(ordered))
            return routed_kernel_read(kind); /* the flag came with this line (or this reader published it) */
        int64_t v;
        if (mode == FC_MODE_TSC && f.l.mult == 0 && attempt < 1 && fc_cal_trylock()) {
            /* No line yet: publish the first one if its baseline is long enough. */
            if (atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_TSC &&
                atomic_load_explicit(&fc_latch.seq, memory_order_acquire) == f.seq)
                fc_mode_recalibrate();
            fc_cal_unlock();
            continue;
        }
        if (mode == FC_MODE_INITIALIZING || mode == FC_MODE_SYSTEM || f.l.mult == 0) {
            /* No line yet, or the kernel's clocks by decision. */
            if (fallback_read(kind, &f, &v)) {
                if (mode == FC_MODE_TSC) /* the first line pending: the status counts these too */
                    atomic_fetch_add_explicit(&fallback_reads, 1, memory_order_relaxed);
                return v;
            }
            continue;
        }
        uint64_t d = f.t - f.l.base_tsc;
        if (d < f.m.soft_span) {
            /* The fast span ends at the next adjtimex poll, which this
             * reader makes (calibration.c); a change seen, or the line found
             * off the kernel, recalibrates now.  The read is made again, on
             * what was published (a stepped line's bound does not cover the
             * old line's error) and after the poll's microseconds. */
            if (d >= f.l.fast_span && attempt < 2 && !polled && fc_cal_trylock()) {
                if (atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_TSC &&
                    atomic_load_explicit(&fc_latch.seq, memory_order_acquire) == f.seq && fc_cal_reader_poll())
                    fc_mode_recalibrate();
                fc_cal_unlock();
                /* Read again, once, without polling again.  A recalibration
                 * skipped (noisy samples) leaves the line answering, as it
                 * does for every other reader meanwhile (a kernel value here
                 * could lie above what they return after it). */
                polled = 1;
                continue;
            }
            return line_value(&f, kind, (int64_t)d); /* injected counter, or raced a new line */
        }
        /* The line has run out.  It is never used past its end, which is
         * what lets the next line start fresh at the kernel's time instead
         * of carrying the old line's error. */
        if (attempt < 2 && fc_cal_trylock()) {
            /* This reader recalibrates (no calibrator thread, or it is late). */
            if (atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_TSC &&
                atomic_load_explicit(&fc_latch.seq, memory_order_acquire) == f.seq)
                fc_mode_recalibrate();
            fc_cal_unlock();
            continue;
        }
        /* Someone else is recalibrating (or we are a signal handler that
         * interrupted them): the kernel answers, without waiting. */
        if (fallback_read(kind, &f, &v)) {
            atomic_fetch_add_explicit(&fallback_reads, 1, memory_order_relaxed);
            return v;
        }
    }
}

/*
 * tsc-percpu, the kernel's clock answering (mode.c fc_percpu_to_kernel):
 * exact, monotonic across threads.  After a switch from mode tsc the
 * global line may have served values up to the switch floor, which the
 * kernel can lag by up to that line's error: until it passes the floor,
 * MONOTONIC is held at the floor and BOOTTIME at the floor plus the offset
 * the lines carried (each its own constant, so held reads never go back);
 * once both have passed, the kernel answers directly, as in mode system
 * (fc_direct_gettime, and the inline reads' kernel_direct).  Wall clocks
 * do not come here: they are MONOTONIC plus their offset (fc_slow_read),
 * the unordered ones too until the floor is passed (a switch from mode tsc
 * leaves them off the vDSO: mode.c fc_mode_enter).
 */
static FC_COLD int64_t percpu_kernel_read(enum fc_kind kind)
{
    fc_direct_fn k = fc_refclock_answering();
    int64_t floor = atomic_load_explicit(&fc_percpu_switch_floor, memory_order_relaxed);
    int64_t mono = direct_ns(k, CLOCK_MONOTONIC);
    int64_t boot = 0, boot_floor = 0;
    if (kind == FC_BOOT || floor != 0) {
        boot = direct_ns(k, CLOCK_BOOTTIME);
        boot_floor = floor != 0 ? floor + fc_cal_boot_offset(boot - mono) : 0;
    }
    if (mono < floor || boot < boot_floor) {
        if (kind == FC_MONO)
            return mono < floor ? floor : mono;
        if (kind == FC_BOOT)
            return boot < boot_floor ? boot_floor : boot;
        return direct_ns(k, fc_kind_clock(kind));
    }
    fc_direct_fn expected = 0;
    if (atomic_compare_exchange_strong_explicit(&fc_direct_gettime, &expected, k, memory_order_acq_rel,
                                                memory_order_acquire)) {
        take_kernel_route(k, 1);
        fc_wall_enter_percpu(); /* past the floor: the unordered wall reads too (mode.c fc_mode_enter) */
    }
    if (kind == FC_MONO)
        return mono;
    return kind == FC_BOOT ? boot : direct_ns(k, fc_kind_clock(kind));
}

/*
 * tsc-percpu's lines as the reads' first route.  The global line has
 * nothing to say in tsc-percpu, yet a read that tries it first loads and
 * tests it before its rdtscp -- which waits for those loads -- and then
 * takes the slow path's tests: forced percpu on an Intel guest cost
 * 1.08-1.09x libc's clock_gettime for fastclock_mono_ns that way, and
 * 1.12-1.18x for fastclock_gettime.  So the first per-CPU read of each
 * flavour puts fc_percpu_route_gettime where the reads' first test looks
 * (fc_latch.kernel_ordered or kernel_direct; line.h), unless a kernel route
 * is there: from then on the read goes straight to the per-CPU lines.
 * Every pass through it checks that they still answer: a mode that left
 * tsc-percpu (a fail-safe) or handed it to the kernel finds the route here
 * and takes it down, and the read takes the slow path.
 */
/* A route from `from` to `to`, only if it is still `from` (a kernel route
 * stored meanwhile stays); loaded first: the line every read loads. */
static void swap_route(_Atomic(fc_direct_fn) *slot, fc_direct_fn from, fc_direct_fn to)
{
    if (atomic_load_explicit(slot, memory_order_relaxed) == from)
        atomic_compare_exchange_strong_explicit(slot, &from, to, memory_order_relaxed, memory_order_relaxed);
}

static void take_percpu_route(int ordered)
{
    /* kernel_direct is also fastclock_inline.h's test for its ordered
     * reads: where those are the kernel's (FC_READ_ORDERED_KERNEL), the
     * unordered route stays off, or they would read the lines. */
    if (!ordered && routed_to_kernel(1))
        return;
    swap_route(ordered ? &fc_latch.kernel_ordered : &fc_latch.kernel_direct, 0, fc_percpu_route_gettime);
}

static FC_COLD void drop_percpu_route(void)
{
    swap_route(&fc_latch.kernel_ordered, fc_percpu_route_gettime, 0);
    swap_route(&fc_latch.kernel_direct, fc_percpu_route_gettime, 0);
}

/* The per-CPU lines answer kind now (acquire: the switch floor is written
 * before the mode). */
FC_INLINE int percpu_lines_answer(enum fc_kind kind)
{
    return FC_LIKELY(!fc_kind_is_wall(kind)) &&
           FC_LIKELY(atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_PERCPU) &&
           FC_LIKELY(!fc_percpu_to_kernel());
}

static FC_COLD int64_t percpu_route_off(enum fc_kind kind)
{
    if (atomic_load_explicit(&fc_mode, memory_order_acquire) != FC_MODE_PERCPU || fc_percpu_to_kernel())
        drop_percpu_route();
    return fc_slow_read(kind, 1); /* a wall clock: MONOTONIC plus the offset, or the kernel's */
}

/* The lines' value for kind where they still answer, else the route's end:
 * the checks and this CPU's line inline, so that MONOTONIC's instance is one
 * function (through fc_percpu_read it took two more jumps and tests of the
 * kind). */
FC_INLINE int64_t percpu_route_read(enum fc_kind kind)
{
    int64_t ns;
    if (FC_UNLIKELY(!percpu_lines_answer(kind)))
        return percpu_route_off(kind);
    if (FC_LIKELY(fc_percpu_read_fast(kind, &ns)))
        return ns;
    return fc_percpu_read_slow(kind);
}

static int64_t percpu_route_ns(enum fc_kind kind)
{
    return percpu_route_read(kind);
}

static __attribute__((noinline)) int64_t percpu_route_mono(void)
{
    return percpu_route_read(FC_MONO);
}

static int gettime_new_second(enum fc_kind kind, int64_t ns, struct timespec *ts);

/* Every id but MONOTONIC on its lines' fast read, and that read when its
 * line or this thread's second could not answer. */
static __attribute__((noinline)) int percpu_route_gettime_slow(clockid_t id, struct timespec *ts)
{
    enum fc_kind kind = kind_of(id);
    int64_t ns;
    if (FC_UNLIKELY(id != CLOCK_MONOTONIC && id != CLOCK_BOOTTIME && id != CLOCK_REALTIME && id != CLOCK_TAI))
        return fc_refclock_answering()(id, ts); /* not the lines' clocks (-errno, as the kernel's route) */
    if (FC_LIKELY(kind == FC_MONO) && percpu_lines_answer(FC_MONO))
        ns = fc_percpu_read_slow(FC_MONO);
    else
        ns = percpu_route_ns(kind);
    if (FC_UNLIKELY(ns == 0)) /* the kernel refused: its answer, in the route's convention (-errno) */
        return fc_refclock_answering()(id, ts);
    split_ts(kind, ns, ts);
    return 0;
}

/* MONOTONIC from this CPU's line and this thread's second is a leaf: no
 * frame, no saved register (it pushed and popped four); everything else
 * is a tail call.  With percpu_route_mono, forced tsc-percpu on an Intel
 * guest lost 4% through the .so (A/B, one process): fastclock_gettime
 * 1.17x -> 1.12x libc's clock_gettime, fastclock_mono_ns 1.10x -> 1.06x. */
int fc_percpu_route_gettime(clockid_t id, struct timespec *ts)
{
    int64_t ns, sec, rem;
    if (FC_LIKELY(id == CLOCK_MONOTONIC) && FC_LIKELY(percpu_lines_answer(FC_MONO)) &&
        FC_LIKELY(fc_percpu_read_fast(FC_MONO, &ns))) {
        if (FC_UNLIKELY(!fc_split_seconds_cached(FC_MONO, ns, &sec, &rem)))
            return gettime_new_second(FC_MONO, ns, ts);
        ts->tv_sec = (time_t)sec;
        ts->tv_nsec = (long)rem;
        return 0;
    }
    return percpu_route_gettime_slow(id, ts);
}

__attribute__((noinline)) int64_t fc_slow_read(enum fc_kind kind, int ordered)
{
    fc_direct_fn f = atomic_load_explicit(&fc_direct_gettime, memory_order_relaxed);
    if (FC_LIKELY(f != 0))
        return direct_ns(f, fc_kind_clock(kind));
    /* The mode first (acquire), then the routes: a mode set after the first
     * line shows the flags written before it. */
    int mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
    if (routed_to_kernel(ordered))
        return routed_kernel_read(kind);
    /* tsc-percpu's reads, every one of them (the global line routes them here). */
    if (FC_LIKELY(!fc_kind_is_wall(kind) && mode == FC_MODE_PERCPU)) {
        if (!fc_percpu_to_kernel())
            take_percpu_route(ordered);
        return percpu_answer(kind);
    }
    return slow_read(kind, ordered);
}

/* ---------------------------------------------------------------- coarse */

int fc_coarse_ticker_coming(void)
{
    int mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
    return (mode == FC_MODE_TSC || mode == FC_MODE_PERCPU) && fc_upkeep_running();
}

static FC_COLD int64_t coarse_slow(enum fc_kind kind)
{
    clockid_t id = kind == FC_REAL ? CLOCK_REALTIME_COARSE : CLOCK_MONOTONIC_COARSE;
    if (atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_UNINIT)
        fc_try_init();
    int mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
    if (mode == FC_MODE_TSC || mode == FC_MODE_PERCPU)
        fc_coarse_request();
    if (fc_coarse_ticker_coming()) {
        /* Its first tick comes at the thread's next wake-up (at once
         * where it waits on its futex, within its 10 ms look at the kernel
         * where it waits on its timerfd): serve the clock it will publish,
         * the fine one, through the hand-over that keeps the tick from
         * publishing less (upkeep.c). */
        if (kind == FC_REAL)
            return fastclock_real_ns();
        return fc_coarse_serve_before_tick(fastclock_mono_ns());
    }
    int64_t floor = fc_coarse_floor();
    int64_t k = fc_kernel_ns(id);
    int no_ticker = !fc_upkeep_running() ||
                    (mode == FC_MODE_SYSTEM && atomic_load_explicit(&fc_coarse.stopped, memory_order_acquire));
    if (mode != FC_MODE_UNINIT && mode != FC_MODE_INITIALIZING && no_ticker &&
        atomic_load_explicit(&fc_coarse.handover, memory_order_acquire) <= 0) {
        /* Nobody will tick (no thread, or its ticker stopped for mode
         * system) and no reader can note a value any more (the hand-over
         * never used, or closed): from now on the vDSO's coarse clocks
         * answer directly, as in mode system from the start (through this
         * cold path they cost 1.8x the kernel's, measured) -- at once if
         * nothing was ever served from memory, else (a fork child of a
         * process whose thread ticked, for its whole life; a fail-safe)
         * once the kernel's coarse MONOTONIC has passed it. */
        if (floor == 0 || (kind == FC_MONO ? k : fc_kernel_ns(CLOCK_MONOTONIC_COARSE)) >= floor) {
            atomic_store_explicit(&fc_coarse.direct, fc_refclock_answering(), memory_order_seq_cst);
            /* A thread started meanwhile (a JNI library loaded again) has
             * dropped the route and reopened the hand-over after this read
             * looked (fc_coarse_resume_ticking): dropped again, so that
             * readers note their values for its first tick.  (Reads that
             * took the route in between are the kernel's coarse values of
             * those few instructions.) */
            if (atomic_load_explicit(&fc_coarse.handover, memory_order_seq_cst) > 0)
                atomic_store_explicit(&fc_coarse.direct, (fc_coarse_fn)0, memory_order_relaxed);
        }
    }
    /* MONOTONIC never below a value served earlier from memory (the
     * kernel's coarse clock lags its tick by up to 4 ms). */
    if (kind == FC_MONO && k < floor)
        k = floor;
    return k;
}

/* No ticker: one jump into the vDSO's coarse clock where no thread will
 * tick (fc_coarse.direct), in mode system and before the decision
 * (fc_direct_gettime) -- through the cold path it cost 1.8x the kernel's,
 * measured; else the slow path. */
FC_INLINE int64_t coarse_from_kernel(enum fc_kind kind, clockid_t id)
{
    fc_coarse_fn g = atomic_load_explicit(&fc_coarse.direct, memory_order_relaxed);
    if (FC_LIKELY(g != 0))
        return direct_ns(g, id);
    /* Before the decision, through the wrapper that counts reads towards
     * it.  Not once the fine reads go to the kernel (tsc-percpu's route):
     * its ticker serves the coarse clocks there, and after a fork its last
     * value is the floor the kernel's coarse clock must not undercut
     * (coarse_slow); mode system from the start has fc_coarse.direct. */
    fc_direct_fn f = atomic_load_explicit(&fc_direct_gettime, memory_order_relaxed);
    if (f == deferred_gettime || f == deciding_gettime)
        return direct_ns(f, id);
    return coarse_slow(kind);
}

/* From memory while the ticker runs; else the kernel's. */
FC_API int64_t fastclock_mono_coarse_ns(void)
{
    int64_t v = atomic_load_explicit(&fc_coarse.mono, memory_order_acquire);
    if (FC_LIKELY(v != 0))
        return v;
    return coarse_from_kernel(FC_MONO, CLOCK_MONOTONIC_COARSE);
}

FC_API int64_t fastclock_real_coarse_ns(void)
{
    if (FC_LIKELY(atomic_load_explicit(&fc_coarse.mono, memory_order_acquire) != 0))
        return atomic_load_explicit(&fc_coarse.real, memory_order_relaxed);
    return coarse_from_kernel(FC_REAL, CLOCK_REALTIME_COARSE);
}

/* ---------------------------------------------------------------- ticks */

/* The first ticks (decides the mode: the unit depends on it), and every
 * one after the mode left tsc. */
static FC_COLD uint64_t ticks_slow(void)
{
    fc_decide_now();
    if (atomic_load_explicit(&fc_ticks_raw, memory_order_acquire))
        return fc_counter_unordered();
    int mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
    if (mode == FC_MODE_UNINIT || mode == FC_MODE_INITIALIZING)
        return fc_ticks_before_decision(); /* it could not wait for the decision */
    if (mode == FC_MODE_TSC && !fc_ticks_synthesised() && !atomic_load_explicit(&fc_ticks_in_ns, memory_order_relaxed))
        return fc_now_counter(0); /* an injected counter (tests) */
    fc_direct_fn direct = atomic_load_explicit(&fc_ticks_direct, memory_order_acquire);
    if (direct != 0)
        return (uint64_t)direct_ns(direct, CLOCK_MONOTONIC);
    return fc_ticks_synth(fastclock_mono_ns());
}

/* Counter ticks while mode tsc lasts; the unit never changes after that
 * (mode.c, the ticks map), so a difference always converts correctly. */
FC_API uint64_t fastclock_ticks(void)
{
    if (FC_LIKELY(atomic_load_explicit(&fc_ticks_raw, memory_order_relaxed)))
        return fc_counter_unordered();
    /* Not tsc at the decision: ticks are ns of the kernel's MONOTONIC, one vDSO call. */
    fc_direct_fn f = atomic_load_explicit(&fc_ticks_direct, memory_order_relaxed);
    if (FC_LIKELY(f != 0))
        return (uint64_t)direct_ns(f, CLOCK_MONOTONIC);
    return ticks_slow();
}

FC_API int64_t fastclock_ticks_to_ns(uint64_t ticks)
{
    return fc_ticks_to_ns(ticks);
}

/* ---------------------------------------------------------------- POSIX shapes */

/* libc would crash in the vDSO; the kernel says EINVAL or EFAULT.  A clock
 * every Linux has is EFAULT without asking: no system call (a sandbox may
 * kill one that a vDSO never makes). */
static FC_COLD int gettime_null(clockid_t id)
{
    if (fc_clock_always_there(id)) {
        errno = EFAULT;
        return -1;
    }
    if (fc_seam.kernel_gettime)
        return fc_seam.kernel_gettime(id, 0);
    return (int)syscall(SYS_clock_gettime, id, (struct timespec *)0);
}

/* The line could not answer: the vDSO directly in mode system, else what
 * fastclock_mono_ns and the others take (fc_slow_read, which in tsc-percpu
 * puts the lines' route in place: later reads jump there first). */
static __attribute__((noinline)) int gettime_slow(clockid_t id, struct timespec *ts, enum fc_kind kind)
{
    fc_direct_fn f = atomic_load_explicit(&fc_direct_gettime, memory_order_relaxed);
    if (FC_LIKELY(f != 0))
        return fc_answering_result(f(id, ts)); /* the wrapper's or the kernel's -errno (a seccomp refusal) */
    return kernel_if_refused(id, ts, fc_slow_read(kind, 1));
}

/* A new second for this thread's cache: out of the fine path, so that it
 * stays a leaf. */
static __attribute__((noinline)) int gettime_new_second(enum fc_kind kind, int64_t ns, struct timespec *ts)
{
    /* The cache just missed: the division, without checking it again. */
    int64_t sec = fc_new_second(kind, ns);
    ts->tv_sec = (time_t)sec;
    ts->tv_nsec = (long)(ns - sec * FC_NS_PER_SEC);
    return 0;
}

/* Every call but the vDSO's (wall clocks) is a tail call: MONOTONIC's path
 * sets up no frame and saves one register (rbx, the seq kept across the
 * counter read, GCC 12 here), after its kernel-route test. */
FC_INLINE int gettime_fine(enum fc_kind kind, clockid_t id, struct timespec *ts)
{
    int64_t ns;
    fc_gettime_fn w = fc_wall_route(kind, 1);
    if (w != 0)
        return w(id, ts); /* a jump: the kernel's -errno as it is (fastclock.h) */
    fc_direct_fn k = fc_kernel_route(1);
    if (FC_UNLIKELY(k != 0))
        return k(id, ts); /* as fc_read: the kernel's clock, the caller's timespec, its -errno */
    if (FC_UNLIKELY(!fc_read_line(kind, 1, &ns)))
        return gettime_slow(id, ts, kind);
    int64_t sec, rem;
    if (FC_UNLIKELY(!fc_split_seconds_cached(kind, ns, &sec, &rem)))
        return gettime_new_second(kind, ns, ts);
    ts->tv_sec = (time_t)sec;
    ts->tv_nsec = (long)rem;
    return 0;
}

/* BOOTTIME and TAI go as MONOTONIC and REALTIME do (gettime_fine), so that
 * where the kernel answers them its refusal comes back, as theirs does,
 * not a zero time (fc_read's 0) with success.  Likewise the coarse clocks
 * where the kernel's coarse clock answers them (nothing ticks). */
static __attribute__((noinline)) int gettime_other(clockid_t id, struct timespec *ts)
{
    enum fc_kind kind;
    switch (id) {
    case CLOCK_MONOTONIC_COARSE: kind = FC_MONO; break;
    case CLOCK_REALTIME_COARSE: kind = FC_REAL; break;
    case CLOCK_BOOTTIME: return gettime_fine(FC_BOOT, id, ts);
    case CLOCK_TAI:
        if (FC_UNLIKELY(!fc_wall_tai_readable()))
            return fc_kernel_gettime(id, ts);
        return gettime_fine(FC_TAI, id, ts);
    default: return fc_kernel_gettime(id, ts);
    }
    fc_coarse_fn g = atomic_load_explicit(&fc_coarse.direct, memory_order_relaxed);
    if (g != 0 && atomic_load_explicit(&fc_coarse.mono, memory_order_acquire) == 0)
        return g(id, ts); /* mode system: the kernel's coarse clock, its -errno as the fine ones' */
    return kernel_if_refused(id, ts, kind == FC_MONO ? fastclock_mono_coarse_ns() : fastclock_real_coarse_ns());
}

static __attribute__((noinline)) int gettime_real(struct timespec *ts)
{
    return gettime_fine(FC_REAL, CLOCK_REALTIME, ts);
}

FC_API int fastclock_gettime(clockid_t id, struct timespec *ts)
{
    if (FC_UNLIKELY(!ts))
        return gettime_null(id);
    if (FC_LIKELY(id == CLOCK_MONOTONIC))
        return gettime_fine(FC_MONO, CLOCK_MONOTONIC, ts);
    if (FC_LIKELY(id == CLOCK_REALTIME)) {
        /* Routed to the vDSO (wall.h): jump there before gettime_real's frame. */
        fc_gettime_fn w = fc_wall_route(FC_REAL, 1);
        if (FC_LIKELY(w != 0))
            return w(CLOCK_REALTIME, ts); /* a jump: the kernel's -errno as it is (fastclock.h) */
        return gettime_real(ts);
    }
    return gettime_other(id, ts);
}

static FC_COLD int gettimeofday_slow(struct timeval *tv)
{
    struct timespec ts;
    int saved = errno;
    fc_direct_fn k = fc_kernel_route(1);
    /* The ordered reads' kernel route, as fastclock_gettime's.  A read that
     * failed wrote nothing, and is not taken as a time: REALTIME refused,
     * the kernel's gettimeofday entry answers (as libc's would: a filter may
     * allow it), with errno as it was where it succeeds. */
    int r = k != 0 ? fc_answering_result(k(CLOCK_REALTIME, &ts)) : gettime_slow(CLOCK_REALTIME, &ts, FC_REAL);
    if (FC_UNLIKELY(r != 0)) {
        errno = saved;
        return fc_kernel_gettimeofday(tv, 0);
    }
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = (suseconds_t)(ts.tv_nsec / 1000);
    return 0;
}

/* The line's REALTIME as a timeval; kept out of fastclock_gettimeofday so
 * that its direct route into the vDSO runs before any frame (a shared
 * prologue pushed three registers on that route and cost 2-4%). */
static __attribute__((noinline)) int gettimeofday_line(struct timeval *tv)
{
    int64_t ns, rem;
    if (FC_UNLIKELY(fc_kernel_route(1) != 0 || !fc_read_line(FC_REAL, 1, &ns)))
        return gettimeofday_slow(tv); /* the kernel route first, as fc_read */
    tv->tv_sec = (time_t)fc_split_seconds(FC_REAL, ns, &rem);
    tv->tv_usec = (suseconds_t)((uint32_t)rem / 1000u); /* rem is in [0, 1e9): unsigned is two instructions */
    return 0;
}

/* The kernel's timezone, and the time as a call without one gives it: the
 * kernel's time could be below what the line just gave (by up to the error
 * bound), and calls with and without a timezone keep their order. */
static FC_COLD int gettimeofday_tz(struct timeval *tv, void *tz)
{
    int r = fc_kernel_gettimeofday(0, tz);
    if (r != 0 || !tv)
        return r;
    /* fastclock_gettimeofday(tv, 0)'s path, not a call to it: that goes
     * through the PLT, to the shim's copy where both are loaded. */
    fc_gettimeofday_fn w = atomic_load_explicit(&fc_wall_direct_tv, memory_order_relaxed);
    if (w != 0)
        return fc_vdso_result(w(tv, 0)); /* no jump here: libc's convention, as the timezone's call */
    return gettimeofday_line(tv);
}

FC_API int fastclock_gettimeofday(struct timeval *tv, void *tz)
{
    /* The vDSO's own gettimeofday (wall.h: the kernel's clock reads the
     * counter, or answers every read): one jump, as libc's IFUNC makes.  It
     * writes nothing for a NULL tv; where it makes the system call (mode
     * system on hpet or acpi_pm) a refusal comes back as the kernel's -errno,
     * as fastclock.h says (a timezone's call converts it). */
    fc_gettimeofday_fn w = atomic_load_explicit(&fc_wall_direct_tv, memory_order_relaxed);
    if (FC_LIKELY(w != 0) && FC_LIKELY(tz == 0))
        return w(tv, 0);
    if (FC_UNLIKELY(tz != 0))
        return gettimeofday_tz(tv, tz);
    if (FC_UNLIKELY(!tv))
        return 0;
    return gettimeofday_line(tv);
}

/* ---------------------------------------------------------------- status */

/* The kernel's sync state, sampled at most once a second from here (the
 * calibrator samples it every 50 ms; without one, this is the only source). */
static void fresh_sync(int64_t mono_now, struct fc_sync_snapshot *ks)
{
    fc_sync_get(mono_now, ks);
    /* Paced as any poll: where adjtimex is refused for good (ProtectClock)
     * the state is never known, and every status or bounded read polled. */
    if ((!ks->known || ks->age_ns > FC_NS_PER_SEC) && fc_sync_poll_due(mono_now)) {
        fc_sync_poll(mono_now);
        fc_sync_get(mono_now, ks);
    }
}

/* fastclock's own bound against the kernel's clock, now. */
/* The kernel's own values, but held at `floor` (0: none) until they pass
 * it: how far ahead of the kernel a read is now. */
static int64_t held_ahead(int64_t floor)
{
    if (floor == 0)
        return 0;
    int64_t ahead = floor - fc_kernel_ns(CLOCK_MONOTONIC);
    return ahead > 0 ? ahead : 0;
}

static int64_t own_bound(int mode, int64_t mono_now)
{
    if (FC_LOAD(&fc_latch.read_flags) & FC_READ_KERNEL)
        return 0; /* every fine read is the kernel's own, from the first line on (routed_to_kernel) */
    if (mode == FC_MODE_PERCPU) {
        /* After a switch, reads are held at its floor until the kernel passes it. */
        int64_t ahead = held_ahead(atomic_load_explicit(&fc_percpu_switch_floor, memory_order_relaxed));
        if (fc_percpu_to_kernel())
            return ahead; /* the kernel's own values otherwise */
        struct fc_percpu_stats ps;
        fc_percpu_stats(&ps);
        return ps.bound_ns > ahead ? ps.bound_ns : ahead;
    }
    struct fc_full f;
    snapshot_full(&f, 1);
    if (mode == FC_MODE_SYSTEM) /* after a fail-safe, held at the old line's ceiling (fallback_read) */
        return held_ahead(f.m.floor_ns);
    if (mode != FC_MODE_TSC || !f.l.mult)
        return 0;
    int64_t bound = fc_meta_bound(&f.m, mono_now);
    /* A read held at the old line's end while its writer, preempted,
     * publishes the next (calibration.c, the fallback handshake) stands
     * still as the kernel runs on: mono_now may be such a read (or, where
     * ordered reads are the kernel's, an unordered one, read here), and the
     * line's bound at it does not grow with that lag.  The lag seen now is
     * added (a kernel read after both: never less than the lag).  Reads
     * held longer, after this call, lag further. */
    int64_t held = fc_read(FC_MONO, 0);
    if (held > mono_now)
        held = mono_now;
    int64_t lag = fc_kernel_ns(CLOCK_MONOTONIC) - held;
    return lag > bound ? bound + lag : bound;
}

/* The gap between fastclock_real_bounded's REALTIME and MONOTONIC reads, and
 * the poll's own measure of the offset: both a few reads apart (where both
 * come from one line, its error cancels). */
#define WALL_STEP_SLACK_NS 100000LL

/* Whether the kernel's own clock answers the ordered wall clocks
 * (fastclock_real_ns), so that own_bound's error is not theirs: from the
 * first line on where it reads the counter and was timed cheaper (wall.h),
 * or where the counter costs too much (routed_to_kernel) -- both chosen
 * before any line could have answered them; or from the route's arming
 * (tsc-percpu, mode system). */
static int real_is_kernels(void)
{
    return fc_wall_route(FC_REAL, 1) != 0 || routed_to_kernel(1) || FC_LOAD(&fc_counter_wall_kernel);
}

/* Whether REALTIME - MONOTONIC, read as real and mono, moved from the
 * offset a poll measured: only a step moves it.  Off by the gap between the
 * two reads (a preemption costs one needless poll) and, where the kernel
 * answered REALTIME but the line MONOTONIC, by the line's error, asked only
 * when it matters. */
static int stepped_since(int64_t real, int64_t mono, int64_t wall_offset, int real_kernels, int mode)
{
    int64_t moved = real - mono - wall_offset;
    moved = moved < 0 ? -moved : moved;
    return moved > WALL_STEP_SLACK_NS && (!real_kernels || moved > WALL_STEP_SLACK_NS + own_bound(mode, mono));
}

FC_API int fastclock_real_bounded(int64_t *earliest_ns, int64_t *latest_ns)
{
    if (!earliest_ns || !latest_ns) {
        errno = EFAULT;
        return -1;
    }
    int64_t real = fc_read(FC_REAL, 1);
    int64_t mono = fc_read(FC_MONO, 1);
    int mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
    int real_kernels = real_is_kernels();
    int64_t own = 0;
    if (!real_kernels) {
        own = own_bound(mode, mono);
        /* `real` came first: it may have been held at a line's end that the
         * reads own_bound makes no longer are (the writer done meanwhile). */
        int64_t lag = fc_kernel_ns(CLOCK_REALTIME) - real;
        if (lag > own)
            own += lag;
    }
    int64_t wall_offset;
    int wall_known = fc_sync_wall_offset(&wall_offset); /* before the state: sync.h */
    struct fc_sync_snapshot ks;
    fresh_sync(mono, &ks);
    /* Stepped since the cached poll (date -s, a daemon's ADJ_SETOFFSET): the
     * kernel has reset its maxerror to 16 s and set STA_UNSYNC, which a
     * cache up to a second old (no thread) or 10 ms old (the thread's) does
     * not show yet -- poll now. */
    int unseen_step = 0;
    if (ks.known && wall_known && stepped_since(real, mono, wall_offset, real_kernels, mode)) {
        /* Paced: where every poll is refused since, the offset never
         * refreshes, and every bounded read would poll (the step stays
         * unseen, below, and the bound 16 s). */
        if (fc_sync_poll_due(mono))
            fc_sync_poll(mono);
        /* The poll may not have seen the kernel after the step: refused (a
         * filter installed since the last answer), or another thread's poll
         * still under way.  Then the offset is the old one, and the state
         * with it from before the step. */
        wall_known = fc_sync_wall_offset(&wall_offset);
        fc_sync_get(mono, &ks);
        unseen_step = !wall_known || stepped_since(real, mono, wall_offset, real_kernels, mode);
    }
    /* Unknown kernel state, or a step it has not been seen after: assume
     * the worst an unsynchronised clock reports. */
    int64_t kernel_err = ks.known && !unseen_step ? ks.maxerror_ns : 16LL * FC_NS_PER_SEC;
    int64_t e = own + kernel_err;
    *earliest_ns = real - e;
    *latest_ns = real + e;
    return ks.known && ks.synchronized == 1 && !unseen_step ? 0 : 1;
}

static int status_fill(struct fastclock_status *out);

/* The plain symbol, for binaries built before the sizing macro (fastclock.h)
 * and for callers through another language's FFI that know no size to pass:
 * the struct as those binaries knew it, which ended with kernel_read_ns and
 * one reserved word -- where real_source has lain since -- and never more,
 * whatever fields later versions append. */
#undef fastclock_status
#define FC_STATUS_SIZE_PLAIN (offsetof(struct fastclock_status, real_source) + sizeof(uint64_t))
_Static_assert(offsetof(struct fastclock_status, real_source) ==
                   offsetof(struct fastclock_status, kernel_read_ns) + sizeof(double),
               "the plain symbol's callers know the struct up to kernel_read_ns and one reserved word");
FC_API int fastclock_status(struct fastclock_status *out)
{
    return fastclock_status_sized(out, FC_STATUS_SIZE_PLAIN);
}

FC_API int fastclock_status_sized(struct fastclock_status *out, size_t size)
{
    if (!out) {
        errno = EFAULT;
        return -1;
    }
    struct fastclock_status full;
    int r = status_fill(&full);
    if (r == 0) {
        size_t n = size < sizeof full ? size : sizeof full;
        memcpy(out, &full, n);
        if (size > sizeof full) /* a newer caller: fields this library lacks are zero */
            memset((char *)out + sizeof full, 0, size - sizeof full);
    }
    return r;
}

static int status_fill(struct fastclock_status *out)
{
    if (!out) {
        errno = EFAULT;
        return -1;
    }
    memset(out, 0, sizeof *out);
    fc_decide_now();
    fc_first_line_now();

    /* The mode and its reason of one moment: a switch between the two loads
     * (the reason is set first, then the mode) would pair them wrongly. */
    int mode;
    const char *reason;
    do {
        mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
        reason = fc_get_reason();
    } while (mode != atomic_load_explicit(&fc_mode, memory_order_acquire));
    struct fc_full f;
    snapshot_full(&f, 1);
    struct fc_cal_stats st;
    fc_cal_stats(&st);
    struct fc_percpu_stats ps;
    fc_percpu_stats(&ps);
    int64_t now = fastclock_mono_ns();

    out->mode = mode == FC_MODE_TSC      ? "tsc"
                : mode == FC_MODE_PERCPU ? "tsc-percpu"
                : mode == FC_MODE_SYSTEM ? "system"
                                         : "initializing";
    out->reason = reason;
    out->forced = fc_mode_forced();
    uint32_t flags = FC_LOAD(&fc_latch.read_flags);
    out->ordered = !fc_default_unordered();
    out->calibrations = st.calibrations;
    out->fallback_reads = atomic_load_explicit(&fallback_reads, memory_order_relaxed);
    out->realtime_steps = st.realtime_steps;
    out->last_calibration_age_ns = -1;
    out->max_warp_cycles = ps.max_warp_cycles;
    fc_counter_costs(&out->read_ns, &out->kernel_read_ns);
    if (out->read_ns == 0 && out->kernel_read_ns > 0 && mode == FC_MODE_TSC && f.l.mult != 0 && !fc_seam.counter) {
        /* The whole ordered read, measured once, the first time it is asked. */
        struct fc_cal_stats cs;
        fc_cal_stats(&cs);
        out->read_ns = (double)fc_counter_time_calls(fastclock_mono_ns) * cs.rate_ns_per_tick / 16.0;
        fc_counter_note_read_cost(out->read_ns);
    }
    out->last_error_ns = st.last_err_ns;
    out->max_error_ns = st.max_err_ns;
    out->sample_width_ns = st.last_width_ns;
    if (mode == FC_MODE_TSC && f.l.mult != 0) {
        out->counter = (flags & FC_READ_KERNEL) ? "clock_gettime (the counter costs more here)"
                       : (flags & FC_READ_ORDERED_KERNEL)
                           ? "clock_gettime (ordered), " FC_COUNTER_INSN_UNORDERED " (unordered)"
                       : fc_default_unordered()   ? FC_COUNTER_INSN_UNORDERED
                       : (flags & FC_READ_RDTSCP) ? FC_COUNTER_INSN_ALT
                                                  : FC_COUNTER_INSN_ORDERED;
        out->calibrator = fc_upkeep_running() ? "thread" : "lazy";
        out->counter_hz = st.rate_ns_per_tick > 0 ? 1e9 / st.rate_ns_per_tick : 0;
        out->calibration_interval_ns = st.interval_ns;
        out->last_calibration_age_ns = now - f.m.published_mono_ns;
        if (out->last_calibration_age_ns < 0)
            out->last_calibration_age_ns = 0;
    } else if (mode == FC_MODE_PERCPU && fc_percpu_to_kernel()) {
        /* Trusted per CPU, but the kernel's clock is the cheaper read: no lines. */
        out->counter = "clock_gettime (the cheaper read here)";
        out->calibrator = fc_upkeep_running() ? "thread" : "lazy";
        double seed = fc_percpu_seed_rate();
        out->counter_hz = seed > 0 ? 1e9 / seed : 0;
    } else if (mode == FC_MODE_PERCPU) {
        out->counter = (flags & FC_READ_KERNEL)           ? "clock_gettime (the counter costs more here)"
                       : (flags & FC_READ_ORDERED_KERNEL) ? "clock_gettime (ordered), rdtscp (unordered)"
                                                          : "rdtscp";
        out->calibrator = fc_upkeep_running() ? "thread" : "lazy";
        /* Before any CPU's own calibration: the rate seeded at the decision. */
        double seed = fc_percpu_seed_rate();
        out->counter_hz = ps.mean_hz > 0 ? ps.mean_hz : seed > 0 ? 1e9 / seed : 0;
        out->cpus_calibrated = ps.calibrated;
        out->calibration_interval_ns = fc_percpu_interval_ns();
        out->last_calibration_age_ns = ps.calibrated ? ps.max_age_ns : -1;
    } else if (mode == FC_MODE_TSC) {
        /* Trusted, first line not published yet (~20 us after the decision). */
        out->counter = "clock_gettime (first line pending)";
        out->calibrator = fc_upkeep_running() ? "thread" : "lazy";
    } else {
        out->counter = "clock_gettime";
        out->calibrator = "none";
        out->counter_hz = fc_ticks_hz(); /* fastclock_ticks()' unit: ns, or the counter's kept */
    }
    int lines = (mode == FC_MODE_TSC && f.l.mult != 0) || (mode == FC_MODE_PERCPU && !fc_percpu_to_kernel());
    out->real_source = lines && !real_is_kernels() ? "line" : "vdso";
    out->real_line_ratio = mode == FC_MODE_TSC ? fc_counter_wall_ratio() : 0;
    out->error_bound_ns = own_bound(mode, now); /* once: it reads the clocks, and REALTIME's is the same */
    struct fc_sync_snapshot ks;
    fresh_sync(now, &ks);
    out->kernel_synchronized = ks.known ? ks.synchronized : -1;
    out->kernel_maxerror_ns = ks.known ? ks.maxerror_ns : -1;
    out->kernel_esterror_ns = ks.known ? ks.esterror_ns : -1;
    out->real_error_bound_ns =
        (real_is_kernels() ? 0 : out->error_bound_ns) + (ks.known ? ks.maxerror_ns : 16LL * FC_NS_PER_SEC);
    return 0;
}

FC_API const char *fastclock_version(void)
{
#define FC_STR_(x) #x
#define FC_STR(x) FC_STR_(x)
    return FC_STR(FASTCLOCK_VERSION_MAJOR) "." FC_STR(FASTCLOCK_VERSION_MINOR) "." FC_STR(FASTCLOCK_VERSION_PATCH);
}
