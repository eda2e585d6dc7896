/*
 * libfastclock-preload.so: clock_gettime, gettimeofday and timespec_get for
 * unmodified programs, through LD_PRELOAD.
 *
 * Not time(): glibc binds it straight to the vDSO's __vdso_time (an IFUNC),
 * a load from the vvar page; any definition here would add a jump to that
 * (0.5 ns, measured) and could only give the same kernel seconds.
 *
 * Symbols.  The definitions here are unversioned.  The dynamic linker lets
 * an unversioned definition satisfy a versioned reference (clock_gettime@
 * GLIBC_2.17 in current binaries, @GLIBC_2.2.5 in binaries built against
 * librt, such as Temurin's libjvm), so one definition catches both.
 * libc's internal callers use hidden aliases and are not affected; nothing
 * on this system references __clock_gettime (GLIBC_PRIVATE) or
 * __gettimeofday, so they are left alone.
 *
 * Clocks.  REALTIME, MONOTONIC, their _COARSE forms, BOOTTIME and TAI come
 * from fastclock (the same timelines, kept within the reported error
 * bound); every other id goes to the next definition in the lookup order
 * (libc, or another preloaded library) with its return value and errno.
 * When fastclock decided on mode system at start-up, the kernel answers every
 * call, as libc would: the served clocks straight from the vDSO (a hop
 * through libc would cost a second call), every other id through libc.  (After a fail-safe switch at run time the
 * core's kernel reads, which never undercut a value already returned, keep
 * answering instead.)
 *
 * Reads.  By default the fine clocks are ordered reads (rdtscp or lfence;
 * rdtsc: counter.c), as the vDSO's are: a read that happens after another, in any thread, is not
 * earlier.  FASTCLOCK_UNORDERED=1 drops the fence for about half the cost,
 * and then only reads within one thread are ordered; it is opt-in because a
 * program cannot tell that its clock got weaker.
 *
 * Safety.  Nothing in this library reaches these symbols by name: the core
 * reads the kernel through the vDSO's own symbols or a raw system call, and
 * the link wraps any stray reference (see __wrap_* below), so calibration
 * never recurses into the shim.  Every path works before the constructors
 * have run (other libraries' constructors may read the clock first), in
 * signal handlers, and in forked or vforked children.  No thread is started
 * (fc_default_lazy): readers recalibrate under a try-lock, so a process
 * that must stay single-threaded still can.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "calibration.h"
#include "clock.h"
#include "mode.h"
#include "upkeep.h"
#include "wall.h"

#define SHIM_API __attribute__((visibility("default")))
#define SHIM_COLD __attribute__((noinline, cold))
/* glibc declares these pointers __nonnull, which lets the compiler delete
 * our NULL checks; programs do pass NULL, so hide what it was told. */
#define SHIM_MAYBE_NULL(p) __asm__("" : "+r"(p))

/* No calibrator thread in every process the shim is loaded into;
 * FASTCLOCK_CALIBRATOR=thread still asks for one.  (Overrides the weak
 * default of src/defaults.c.) */
const int fc_default_lazy = 1;

/* fastclock_preload_state() bits, for tests and diagnostics. */
#define FC_PRELOAD_LOADED 1       /* always set: the shim is in this process */
#define FC_PRELOAD_CONSTRUCTED 2  /* the shim's constructor has run */
#define FC_PRELOAD_UNORDERED 4    /* FASTCLOCK_UNORDERED=1: fine clocks skip the counter fence */
#define FC_PRELOAD_PASS 8         /* mode system from the start: every call goes to libc */
#define FC_PRELOAD_COARSE_SETTLED 16 /* the coarse clocks' path is set: the kernel's directly, from
                                        memory, or the decided mode's (a thread told) */

typedef int (*gettime_fn)(clockid_t, struct timespec *);
typedef int (*gettimeofday_fn)(struct timeval *, void *);
typedef int (*timespec_get_fn)(struct timespec *, int);

/* The next definitions (libc's, usually); NULL until the constructor has
 * looked them up, and then the kernel is asked directly, with the same
 * results.  Written once, before main. */
static _Atomic(gettime_fn) next_gettime;
static _Atomic(gettimeofday_fn) next_gettimeofday;
static _Atomic(timespec_get_fn) next_timespec_get;
static _Atomic(gettime_fn) vdso_gettime; /* __vdso_clock_gettime, from the constructor */
static _Atomic(gettimeofday_fn) vdso_gettimeofday; /* __vdso_gettimeofday, likewise */

/* Read on every call; each bit is set at most once (never cleared), so the
 * line stays shared-clean. */
#define SHIM_UNORDERED 1 /* by the constructor, from FASTCLOCK_UNORDERED */
#define SHIM_PASS 2      /* by the first read that finds mode system from the start */
static _Atomic int shim_flags;
static _Atomic int constructed;
/* libc answers timespec_get's TIME_MONOTONIC (C23; glibc 2.43 on): the
 * shim serves it on CLOCK_MONOTONIC's timeline as clock_gettime does, or a
 * read of one after the other could go back.  Set by the constructor. */
#define FC_TIME_MONOTONIC 2
static _Atomic int libc_has_time_monotonic;

/* ------------------------------------------------------------ the next definitions */

static int pass_gettime(clockid_t id, struct timespec *ts)
{
    gettime_fn f = atomic_load_explicit(&next_gettime, memory_order_relaxed);
    return f ? f(id, ts) : fc_kernel_gettime(id, ts);
}

static int pass_gettimeofday(struct timeval *tv, void *tz)
{
    gettimeofday_fn f = atomic_load_explicit(&next_gettimeofday, memory_order_relaxed);
    return f ? f(tv, tz) : fc_kernel_gettimeofday(tv, tz);
}

/* time(2) is the kernel's coarse REALTIME, in seconds. */
static time_t kernel_time(time_t *t)
{
    struct timespec ts;
    time_t s = fc_kernel_gettime(CLOCK_REALTIME_COARSE, &ts) == 0 ? ts.tv_sec : (time_t)-1;
    if (t && s != (time_t)-1)
        *t = s;
    return s;
}

static int pass_timespec_get(struct timespec *ts, int base)
{
    timespec_get_fn f = atomic_load_explicit(&next_timespec_get, memory_order_relaxed);
    if (f)
        return f(ts, base);
    if (base != TIME_UTC || fc_kernel_gettime(CLOCK_REALTIME, ts) != 0)
        return 0;
    return base;
}

/* ------------------------------------------------------------ mode */

/*
 * Should this call go to libc?  Asked on the slow path only (in mode system
 * every line routes readers there; before the decision the core's deferred
 * kernel reads answer, and count towards deciding).  A system decision taken at start-up
 * publishes a line with floor 0: nothing was ever served from the counter,
 * so libc's values can follow, now and for good (SHIM_PASS).  A fail-safe
 * switch later publishes the highest value served as the floor, and then the
 * core's clamped kernel reads must answer, not libc.
 */
static int pass_through(void)
{
    if (!fc_system_from_start())
        return 0;

    atomic_fetch_or_explicit(&shim_flags, SHIM_PASS, memory_order_relaxed);
    return 1;
}

/* ------------------------------------------------------------ fine clocks */

/* The three shapes the fine clocks are asked for in. */
enum shape { AS_TIMESPEC, AS_TIMEVAL, AS_TIMESPEC_GET };

/* sec and rem (in [0, 1e9)) into the caller's shape. */
FC_INLINE int stored_split(enum shape shape, void *out, int64_t sec, int64_t rem)
{
    if (shape == AS_TIMEVAL) {
        struct timeval *tv = out;
        tv->tv_sec = (time_t)sec;
        tv->tv_usec = (suseconds_t)((uint32_t)rem / 1000u); /* rem is in [0, 1e9): unsigned is two instructions */
        return 0;
    }
    struct timespec *ts = out;
    ts->tv_sec = (time_t)sec;
    ts->tv_nsec = (long)rem;
    return shape == AS_TIMESPEC_GET ? TIME_UTC : 0;
}

/* A second this thread has not split in yet: the division, once a second. */
static __attribute__((noinline)) int stored_new_second(enum fc_kind kind, enum shape shape, void *out, int64_t ns)
{
    int64_t sec = fc_new_second(kind, ns);
    return stored_split(shape, out, sec, ns - sec * FC_NS_PER_SEC);
}

/* ns into the caller's shape; the per-thread second cache of the core
 * (fc_split_seconds_cached) saves the division by 10^9 on most reads, and
 * the division is a tail call: the fine reads' fast path is a leaf that
 * saves no frame (it cost ~0.3 ns per call, measured), as the core's gettime_fine. */
FC_INLINE int stored(enum fc_kind kind, enum shape shape, void *out, int64_t ns)
{
    int64_t sec, rem;
    if (FC_UNLIKELY(!fc_split_seconds_cached(kind, ns, &sec, &rem)))
        return stored_new_second(kind, shape, out, ns);
    return stored_split(shape, out, sec, rem);
}

/* Mode system from the start: the kernel answers the clocks the shim serves,
 * straight from the vDSO (through libc it would cost a second call: 0.75x
 * for the coarse clocks, measured); every other id still goes to libc. */
static int pass_fine(enum shape shape, clockid_t id, void *out)
{
    gettime_fn vdso = atomic_load_explicit(&vdso_gettime, memory_order_relaxed);
    switch (shape) {
    case AS_TIMEVAL: {
        gettimeofday_fn gtod = atomic_load_explicit(&vdso_gettimeofday, memory_order_relaxed);
        if (FC_LIKELY(gtod != 0))
            return fc_vdso_result(gtod(out, 0));
        return fc_kernel_gettimeofday(out, 0);
    }
    case AS_TIMESPEC_GET:
        if (FC_LIKELY(vdso != 0))
            return vdso(CLOCK_REALTIME, out) == 0 ? TIME_UTC : 0;
        return fc_kernel_gettime(CLOCK_REALTIME, out) == 0 ? TIME_UTC : 0;
    default:
        if (FC_LIKELY(vdso != 0))
            return fc_vdso_result(vdso(id, out));
        return fc_kernel_gettime(id, out);
    }
}

/* First read, line due or expired, mode system: lock-free, and errno is
 * kept (the mode decision reads sysfs). */
static SHIM_COLD int fine_slow(enum fc_kind kind, clockid_t id, void *out, enum shape shape, int ordered)
{
    int saved = errno;
    int pass = pass_through();
    errno = saved;
    if (pass)
        return pass_fine(shape, id, out);
    int64_t ns = fc_slow_read(kind, ordered);
    errno = saved;
    if (FC_UNLIKELY(ns == 0)) /* the kernel refused where it answers: its refusal, as libc's */
        return pass_fine(shape, id, out);
    return stored(kind, shape, out, ns);
}

/* fc_read of src/clock.c, inlined per clock and shape: one snapshot, no
 * call into the core, and the slow path as a tail call. */
FC_INLINE int fine_read(enum fc_kind kind, clockid_t id, void *out, enum shape shape, int ordered)
{
    int64_t ns;
    /* The kernel's clock reads the counter itself (wall.h), or answers this
     * flavour (the core's kernel route: tsc-percpu routed to it, ordered or
     * all reads where the counter costs too much): one call into the vDSO. */
    int (*kernel)(clockid_t, struct timespec *) = fc_kernel_route(ordered);
    /* tsc-percpu's lines on the same route (clock.h) are not the kernel:
     * the core's slow path answers, and libc's values never follow. */
    const int percpu = kernel == fc_percpu_route_gettime;
    if (fc_wall_route(kind, ordered) != 0 || (kernel != 0 && !percpu)) {
        /* Mode system from the start: libc's values can follow for good
         * (pass_through), and the entry points then jump to the vDSO first
         * (unordered reads too: their flag is set from the start). */
        if (kernel != 0 && !(atomic_load_explicit(&shim_flags, memory_order_relaxed) & SHIM_PASS))
            pass_through();
        return pass_fine(shape, id, out);
    }
    if (FC_UNLIKELY(percpu) || FC_UNLIKELY(!fc_read_line(kind, ordered, &ns)))
        return fine_slow(kind, id, out, shape, ordered);
    return stored(kind, shape, out, ns);
}

/* Unordered reads (opt-in) and pass-through, out of the default path. */
#define SHIM_FLAGGED(fn, kind, shape)                                            \
    static __attribute__((noinline)) int fn(clockid_t id, void *out, int flags) \
    {                                                                            \
        if (flags & SHIM_PASS)                                                   \
            return pass_fine(shape, id, out);                                    \
        return fine_read(kind, id, out, shape, 0);                               \
    }
SHIM_FLAGGED(flagged_mono, FC_MONO, AS_TIMESPEC)
SHIM_FLAGGED(flagged_real, FC_REAL, AS_TIMESPEC)
SHIM_FLAGGED(flagged_boot, FC_BOOT, AS_TIMESPEC)
SHIM_FLAGGED(flagged_tai, FC_TAI, AS_TIMESPEC)
SHIM_FLAGGED(flagged_real_tv, FC_REAL, AS_TIMEVAL)
SHIM_FLAGGED(flagged_real_tsget, FC_REAL, AS_TIMESPEC_GET)

FC_INLINE int fine(enum fc_kind kind, clockid_t id, void *out, enum shape shape,
                   int (*flagged)(clockid_t, void *, int))
{
    int flags = atomic_load_explicit(&shim_flags, memory_order_relaxed);
    if (FC_UNLIKELY(flags))
        return flagged(id, out, flags);
    return fine_read(kind, id, out, shape, 1);
}

/* ------------------------------------------------------------ coarse clocks */

/*
 * With a calibrator thread, fastclock serves the coarse clocks from memory
 * (~1 ns).  Without one (the shim's default) fastclock's coarse clocks are
 * the kernel's, read here straight from the vDSO, which is what the core
 * would do with more steps; only a MONOTONIC floor left by a ticker that
 * stopped (in the child of a process that had a calibrator thread) needs
 * the core's clamp, and a thread's coarse clocks before its first tick its
 * hand-over.  In pass-through, libc answers.
 */
/* Set once the mode is decided and a calibrator thread, if any, was told
 * that the coarse clocks are in use (it then serves them from memory). */
static _Atomic int coarse_asked;

/* The core's coarse clock; its 0 (the kernel refused where it answers)
 * is the kernel's refusal, as libc's. */
static SHIM_COLD int coarse_core(enum fc_kind kind, clockid_t id, struct timespec *ts)
{
    int64_t ns = kind == FC_REAL ? fastclock_real_coarse_ns() : fastclock_mono_coarse_ns();
    if (FC_UNLIKELY(ns == 0))
        return fc_kernel_gettime(id, ts);
    return stored(kind, AS_TIMESPEC, ts, ns);
}

static SHIM_COLD int coarse_slow(enum fc_kind kind, clockid_t id, struct timespec *ts)
{
    int saved = errno;
    int pass = pass_through(); /* mode system from the start: libc answers (it decides nothing) */
    errno = saved;
    if (pass)
        return pass_fine(AS_TIMESPEC, id, ts);
    if (!atomic_load_explicit(&coarse_asked, memory_order_relaxed)) {
        int mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
        if (mode == FC_MODE_UNINIT || mode == FC_MODE_INITIALIZING)
            /* Not decided: the core's read, which counts towards the
             * decision.  Where no vDSO gave the coarse clocks a direct route
             * (qemu-user; a kernel booted with vdso=0), or before a thread
             * decides, a program that reads only the coarse clocks would
             * otherwise never decide, and pay this path on every read. */
            return coarse_core(kind, id, ts);
        if (mode == FC_MODE_TSC || mode == FC_MODE_PERCPU)
            fc_coarse_request();
        if (mode != FC_MODE_UNINIT && mode != FC_MODE_INITIALIZING)
            atomic_store_explicit(&coarse_asked, 1, memory_order_relaxed);
    }
    if (atomic_load_explicit(&fc_coarse.mono, memory_order_acquire) != 0 || fc_coarse_ticker_coming() ||
        (kind == FC_MONO && fc_coarse_floor() != 0))
        return coarse_core(kind, id, ts);
    return fc_kernel_gettime(id, ts);
}

FC_INLINE int coarse(enum fc_kind kind, clockid_t id, struct timespec *ts)
{
    gettime_fn direct = atomic_load_explicit(&fc_coarse.direct, memory_order_relaxed);
    if (FC_LIKELY(direct != 0))
        return direct(id, ts); /* the vDSO's coarse clocks never fail (a valid buffer, no system call) */
    /* fastclock_*_coarse_ns, inlined: a ticking calibrator keeps both values. */
    int64_t mono = atomic_load_explicit(&fc_coarse.mono, memory_order_acquire);
    if (FC_LIKELY(mono != 0))
        return stored(kind, AS_TIMESPEC, ts,
                      kind == FC_REAL ? atomic_load_explicit(&fc_coarse.real, memory_order_relaxed) : mono);
    if (FC_UNLIKELY(atomic_load_explicit(&shim_flags, memory_order_relaxed) & SHIM_PASS))
        return pass_fine(AS_TIMESPEC, id, ts);
    if (FC_UNLIKELY(!atomic_load_explicit(&coarse_asked, memory_order_relaxed)))
        return coarse_slow(kind, id, ts);
    /* The core clamps MONOTONIC at a floor, and hands over to a first tick
     * (FASTCLOCK_CALIBRATOR=thread). */
    if (FC_UNLIKELY((kind == FC_MONO && fc_coarse_floor() != 0) || fc_coarse_ticker_coming()))
        return coarse_core(kind, id, ts);
    gettime_fn vdso = atomic_load_explicit(&vdso_gettime, memory_order_relaxed);
    if (FC_LIKELY(vdso != 0))
        return vdso(id, ts); /* coarse ids never fail: no -errno to convert */
    return fc_kernel_gettime(id, ts);
}

/* ------------------------------------------------------------ the interposed symbols */

/* The two clocks programs read most, each in a function of its own so that
 * its fast path is a leaf that saves no registers. */
static __attribute__((noinline)) int gettime_mono(struct timespec *ts)
{
    return fine(FC_MONO, CLOCK_MONOTONIC, ts, AS_TIMESPEC, flagged_mono);
}

static __attribute__((noinline)) int gettime_real(struct timespec *ts)
{
    return fine(FC_REAL, CLOCK_REALTIME, ts, AS_TIMESPEC, flagged_real);
}

static __attribute__((noinline)) int gettimeofday_real(struct timeval *tv)
{
    return fine(FC_REAL, CLOCK_REALTIME, tv, AS_TIMEVAL, flagged_real_tv);
}

/* libc would fault in the vDSO; the kernel says EINVAL (bad id) or EFAULT.
 * A clock every Linux has is EFAULT without the system call, as the core's
 * (clock.c gettime_null). */
static SHIM_COLD int gettime_null(clockid_t id)
{
    if (fc_clock_always_there(id)) {
        errno = EFAULT;
        return -1;
    }
    return (int)syscall(SYS_clock_gettime, id, (struct timespec *)0);
}

static __attribute__((noinline)) int gettime_mono_coarse(struct timespec *ts)
{
    return coarse(FC_MONO, CLOCK_MONOTONIC_COARSE, ts);
}

static __attribute__((noinline)) int gettime_real_coarse(struct timespec *ts)
{
    return coarse(FC_REAL, CLOCK_REALTIME_COARSE, ts);
}

static __attribute__((noinline)) int gettime_other(clockid_t id, struct timespec *ts)
{
    switch (id) {
    case CLOCK_BOOTTIME: return fine(FC_BOOT, id, ts, AS_TIMESPEC, flagged_boot);
    case CLOCK_TAI:
        if (FC_UNLIKELY(!fc_wall_tai_readable()))
            return pass_gettime(id, ts);
        return fine(FC_TAI, id, ts, AS_TIMESPEC, flagged_tai);
    default: return pass_gettime(id, ts);
    }
}

/* Only tail calls: no frame, no saved registers before the clock is read. */
/* The ids fastclock serves, as a bit mask. */
#define SERVED_IDS ((1u << CLOCK_REALTIME) | (1u << CLOCK_MONOTONIC) | (1u << CLOCK_MONOTONIC_COARSE) | \
                    (1u << CLOCK_REALTIME_COARSE) | (1u << CLOCK_BOOTTIME) | (1u << CLOCK_TAI))

SHIM_API int clock_gettime(clockid_t id, struct timespec *ts)
{
    SHIM_MAYBE_NULL(ts);
    if (FC_UNLIKELY(!ts))
        return gettime_null(id);
    if (FC_UNLIKELY(atomic_load_explicit(&shim_flags, memory_order_relaxed) & SHIM_PASS)) {
        /* Mode system: one call into the vDSO for the served clocks, as libc
         * makes; the rest to libc. */
        gettime_fn vdso = atomic_load_explicit(&vdso_gettime, memory_order_relaxed);
        if (FC_LIKELY(vdso != 0)) {
            /* REALTIME and MONOTONIC never fail with a buffer: a tail call, no
             * frame (with one, 1.07x libc here); a bad non-NULL pointer gets the
             * raw -EFAULT where the vDSO makes a system call (docs/shim.md). */
            _Static_assert(CLOCK_REALTIME == 0 && CLOCK_MONOTONIC == 1, "one test for both");
            if ((unsigned)id <= CLOCK_MONOTONIC)
                return vdso(id, ts);
            if ((unsigned)id < 32 && ((SERVED_IDS >> id) & 1))
                return fc_vdso_result(vdso(id, ts));
        }
    }
    /* The coarse clocks first: where the kernel answers them, they cost a
     * few ns, and every test before the jump would show; one compare more
     * on the way to the fine clocks, which cost 30, does not. */
    _Static_assert(CLOCK_MONOTONIC_COARSE == CLOCK_REALTIME_COARSE + 1, "one range test for both");
    if ((unsigned)id - CLOCK_REALTIME_COARSE <= 1) {
        gettime_fn direct = atomic_load_explicit(&fc_coarse.direct, memory_order_relaxed);
        if (FC_LIKELY(direct != 0))
            return direct(id, ts); /* the kernel's coarse clocks: never fail with a valid buffer */
    }
    if (FC_LIKELY(id == CLOCK_MONOTONIC)) {
        /* The kernel answers ordered reads (mode system, decided after the
         * first reads; tsc-percpu routed to it): straight into its clock,
         * before any frame of ours, as libc would -- through gettime_mono,
         * fine_read and pass_fine it cost 1.05-1.07x libc's (measured, Intel
         * guest).  Never fails with a valid buffer.  (tsc-percpu's lines on
         * that route answer as the core's fastclock_gettime would.) */
        gettime_fn k = fc_kernel_route(1);
        if (FC_UNLIKELY(k != 0) && !atomic_load_explicit(&shim_flags, memory_order_relaxed))
            return k(CLOCK_MONOTONIC, ts);
        return gettime_mono(ts);
    }
    if (FC_LIKELY(id == CLOCK_REALTIME)) {
        /* The kernel's clock reads the counter itself (wall.h): straight
         * into the vDSO, before any frame of ours, as libc would. */
        gettime_fn w = atomic_load_explicit(&fc_wall_direct, memory_order_relaxed);
        if (FC_LIKELY(w != 0) && !atomic_load_explicit(&shim_flags, memory_order_relaxed))
            return w(CLOCK_REALTIME, ts);
        return gettime_real(ts);
    }
    if (id == CLOCK_MONOTONIC_COARSE)
        return gettime_mono_coarse(ts);
    if (id == CLOCK_REALTIME_COARSE)
        return gettime_real_coarse(ts);
    return gettime_other(id, ts);
}

/* gettimeofday's cases other than the vDSO's jump. */
static __attribute__((noinline)) int gettimeofday_other(struct timeval *tv, void *tz, int flags)
{
    if (FC_UNLIKELY(tz != 0)) {
        /* The kernel's timezone from libc; the time as a call without one
         * gives it, so that calls with and without a timezone keep their
         * order (the kernel's time can be below what a line just gave). */
        int r = pass_gettimeofday(0, tz);
        if (r != 0)
            return r;
    }
    if (FC_UNLIKELY(!tv))
        return 0;
    if (FC_UNLIKELY(flags & SHIM_PASS)) {
        gettimeofday_fn vdso = atomic_load_explicit(&vdso_gettimeofday, memory_order_relaxed);
        if (FC_LIKELY(vdso != 0))
            return fc_vdso_result(vdso(tv, 0)); /* mode system: one call into the vDSO, as libc makes */
    }
    return gettimeofday_real(tv);
}

SHIM_API int gettimeofday(struct timeval *restrict tv, void *restrict tz)
{
    SHIM_MAYBE_NULL(tv);
    /* Ordered, no timezone, and the kernel's clock reads the counter itself
     * (or answers every read): one jump into the vDSO (libc's own
     * gettimeofday is an IFUNC that resolves to it), before any frame or
     * test of ours beyond these.  A NULL tv: the vDSO writes nothing. */
    gettimeofday_fn w = atomic_load_explicit(&fc_wall_direct_tv, memory_order_relaxed);
    int flags = atomic_load_explicit(&shim_flags, memory_order_relaxed);
    if (FC_LIKELY(w != 0) && FC_LIKELY(!flags) && FC_LIKELY(tz == 0))
        return w(tv, 0); /* never fails with a valid tv or none */
    return gettimeofday_other(tv, tz, flags);
}

SHIM_API int timespec_get(struct timespec *ts, int base)
{
    SHIM_MAYBE_NULL(ts);
    if (FC_UNLIKELY(base != TIME_UTC || !ts)) {
        if (base == FC_TIME_MONOTONIC && ts && atomic_load_explicit(&libc_has_time_monotonic, memory_order_relaxed))
            return gettime_mono(ts) == 0 ? base : 0;
        return ts ? pass_timespec_get(ts, base) : 0;
    }
    return fine(FC_REAL, CLOCK_REALTIME, ts, AS_TIMESPEC_GET, flagged_real_tsget);
}

/* Which shim is this, and how is it configured (FC_PRELOAD_* bits). */
SHIM_API int fastclock_preload_state(void)
{
    int s = FC_PRELOAD_LOADED;
    int flags = atomic_load_explicit(&shim_flags, memory_order_relaxed);
    if (atomic_load_explicit(&constructed, memory_order_acquire))
        s |= FC_PRELOAD_CONSTRUCTED;
    if (flags & SHIM_UNORDERED)
        s |= FC_PRELOAD_UNORDERED;
    if (flags & SHIM_PASS)
        s |= FC_PRELOAD_PASS;
    if (atomic_load_explicit(&coarse_asked, memory_order_relaxed) ||
        atomic_load_explicit(&fc_coarse.direct, memory_order_relaxed) ||
        atomic_load_explicit(&fc_coarse.mono, memory_order_relaxed))
        s |= FC_PRELOAD_COARSE_SETTLED;
    return s;
}

/* ------------------------------------------------------------ stray references
 * The link maps any reference to these names inside the library (the core
 * must never make one, but a helper might) to the kernel, never back into
 * the definitions above. */

FC_HIDDEN int __wrap_clock_gettime(clockid_t id, struct timespec *ts);
FC_HIDDEN int __wrap_gettimeofday(struct timeval *tv, void *tz);
FC_HIDDEN time_t __wrap_time(time_t *t);
FC_HIDDEN int __wrap_timespec_get(struct timespec *ts, int base);

int __wrap_clock_gettime(clockid_t id, struct timespec *ts) { return fc_kernel_gettime(id, ts); }
int __wrap_gettimeofday(struct timeval *tv, void *tz) { return fc_kernel_gettimeofday(tv, tz); }
time_t __wrap_time(time_t *t) { return kernel_time(t); }
int __wrap_timespec_get(struct timespec *ts, int base)
{
    if (base != TIME_UTC || fc_kernel_gettime(CLOCK_REALTIME, ts) != 0)
        return 0;
    return base;
}

/* ------------------------------------------------------------ start-up */

static int env_flag(const char *name)
{
    const char *v = secure_getenv(name);
    int flag = v ? fc_env_flag(v) : 0;
    if (flag >= 0)
        return flag;
    fc_env_ignored(name, v, "it must be 0 or 1");
    return 0;
}

/* The next definition of a symbol, unless the lookup finds this library
 * again (loaded twice) or nothing. */
static void *next_symbol(const char *name, void *self)
{
    void *f = dlsym(RTLD_NEXT, name);
    return f == self ? 0 : f;
}

/* Runs before main, but possibly after other libraries' constructors have
 * already read the clock: everything above works without it. */
__attribute__((constructor)) static void fc_preload_loaded(void)
{
    atomic_store_explicit(&next_gettime, (gettime_fn)next_symbol("clock_gettime", (void *)clock_gettime),
                          memory_order_relaxed);
    atomic_store_explicit(&next_gettimeofday,
                          (gettimeofday_fn)next_symbol("gettimeofday", (void *)gettimeofday),
                          memory_order_relaxed);
    atomic_store_explicit(&next_timespec_get,
                          (timespec_get_fn)next_symbol("timespec_get", (void *)timespec_get),
                          memory_order_relaxed);
    timespec_get_fn next_tsget = atomic_load_explicit(&next_timespec_get, memory_order_relaxed);
    struct timespec probe;
    int saved = errno;
    if (next_tsget && next_tsget(&probe, FC_TIME_MONOTONIC) == FC_TIME_MONOTONIC)
        atomic_store_explicit(&libc_has_time_monotonic, 1, memory_order_relaxed);
    errno = saved;
    /* The core's vDSO pointers (refclock.c finds them, per architecture). */
    atomic_store_explicit(&vdso_gettime, fc_refclock_vdso_gettime(), memory_order_relaxed);
    atomic_store_explicit(&vdso_gettimeofday, fc_refclock_vdso_gettimeofday(), memory_order_relaxed);
    /* Without a calibrator thread (the shim's default) no ticker ever serves
     * the coarse clocks: the core's direct route to the vDSO's (upkeep.h),
     * from the start (NULL with FASTCLOCK_CALIBRATOR=thread or no vDSO). */
    if (!fc_upkeep_running() && fc_calibrator_pref() != FC_CAL_THREAD) {
        atomic_store_explicit(&fc_coarse.direct, atomic_load_explicit(&vdso_gettime, memory_order_relaxed),
                              memory_order_relaxed);
    }
    if (env_flag("FASTCLOCK_UNORDERED")) {
        atomic_fetch_or_explicit(&shim_flags, SHIM_UNORDERED, memory_order_relaxed);
        fc_set_default_unordered(1); /* fastclock_status().ordered tells the truth */
    }
    atomic_store_explicit(&constructed, 1, memory_order_release);
}
