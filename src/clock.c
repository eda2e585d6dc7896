/*
 * The public clocks.
 *
 * Fast path (mode tsc, line current): two loads of seq, six loads from one
 * cache line, lfence, rdtsc, one 64x64->128 multiply.  No locks, no
 * syscalls, no stores.  Everything else -- first use, mode system, a line
 * that is due or expired, injected test counters -- goes through
 * fc_slow_read, which is still lock-free and async-signal-safe.
 */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "calibration.h"
#include "mode.h"
#include "percpu.h"
#include "sync.h"

#define FC_API __attribute__((visibility("default")))

struct fc_latch fc_latch;
struct fc_coarse fc_coarse;
__thread int64_t fc_last_second[FC_TAI + 1] __attribute__((tls_model("initial-exec")));

__attribute__((noinline)) int64_t fc_new_second(enum fc_kind kind, int64_t ns)
{
    int64_t sec = ns / FC_NS_PER_SEC - (ns % FC_NS_PER_SEC < 0);
    fc_last_second[kind] = sec;
    return sec;
}
static _Atomic uint64_t fallback_reads;

/* ---------------------------------------------------------------- fast path */

FC_INLINE int64_t fc_read(enum fc_kind kind, int ordered)
{
    struct fc_snap s;
    if (FC_UNLIKELY(!fc_snapshot(&s, kind, ordered)))
        return fc_slow_read(kind, ordered);
    uint64_t d = s.t - s.base_tsc;
    if (FC_UNLIKELY(d >= s.fast_span))
        return fc_slow_read(kind, ordered);
    return fc_eval(s.base_ns, s.base_frac, s.mult, (int64_t)d) + s.offset;
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
    f->seq = fc_latch_copy(&fc_latch, &f->l, &f->m, &f->t, ordered);
}

static int64_t line_value(const struct fc_full *f, enum fc_kind kind, int64_t d)
{
    return fc_eval(f->l.base_ns, f->l.base_frac, f->l.mult, d) + fc_kind_offset(&f->l, kind);
}

/*
 * The kernel answers, and MONOTONIC/BOOTTIME are clamped so that nothing
 * returned earlier (from a line that may have run slightly ahead) is undercut:
 * at most the line's end value, at most kernel + the line's error bound.
 * A newer line published meanwhile means retry, so every kernel value
 * returned here precedes the next line -- which starts at or above the kernel.
 */
static int fallback_read(enum fc_kind kind, const struct fc_full *f, int64_t *out)
{
    int64_t k = fc_kernel_ns(fc_kind_clock(kind));
    if (atomic_load_explicit(&fc_latch.seq, memory_order_acquire) != f->seq)
        return 0;
    if (kind == FC_MONO || kind == FC_BOOT) {
        int64_t off = kind == FC_BOOT ? f->l.boot_offset : 0;
        int64_t floor;
        if (f->l.mult != 0) {
            int64_t end = line_value(f, FC_MONO, (int64_t)f->m.soft_span);
            int64_t cap = k - off + f->m.error_bound_ns;
            floor = (end < cap ? end : cap) + off;
        } else {
            floor = f->m.floor_ns + off;
        }
        if (k < floor)
            k = floor;
    }
    *out = k;
    return 1;
}

int64_t fc_slow_read(enum fc_kind kind, int ordered)
{
    for (int attempt = 0;; attempt++) {
        int mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
        if (mode == FC_MODE_UNINIT) {
            fc_try_init();
            continue;
        }
        if (mode == FC_MODE_PERCPU)
            return fc_percpu_read(kind);
        struct fc_full f;
        snapshot_full(&f, ordered);
        int64_t v;
        if (mode == FC_MODE_INITIALIZING || mode == FC_MODE_SYSTEM || f.l.mult == 0) {
            /* No line yet, or the kernel's clocks by decision. */
            if (fallback_read(kind, &f, &v))
                return v;
            continue;
        }
        uint64_t d = f.t - f.l.base_tsc;
        if (d < f.m.soft_span)
            return line_value(&f, kind, (int64_t)d); /* injected counter, or raced a new line */
        /* The line has run out.  It is never used past its end, which is
         * what lets the next line start fresh at the kernel's time instead
         * of carrying the old line's error. */
        if (attempt < 2 && fc_cal_trylock()) {
            /* This reader recalibrates (no calibrator thread, or it is late). */
            if (atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_TSC &&
                atomic_load_explicit(&fc_latch.seq, memory_order_acquire) == f.seq)
                fc_cal_recalibrate();
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

/* ---------------------------------------------------------------- coarse */

static int64_t coarse_slow(enum fc_kind kind)
{
    if (atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_UNINIT)
        fc_try_init();
    int mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
    if (mode == FC_MODE_TSC || mode == FC_MODE_PERCPU)
        fc_coarse_request();
    int64_t k = fc_kernel_ns(kind == FC_REAL ? CLOCK_REALTIME_COARSE : CLOCK_MONOTONIC_COARSE);
    if (kind == FC_MONO) {
        /* Never below a value served earlier from memory (the kernel's coarse
         * clock lags its tick by up to 4 ms). */
        int64_t floor = atomic_load_explicit(&fc_coarse.floor_mono, memory_order_relaxed);
        if (k < floor)
            k = floor;
    }
    return k;
}

FC_API int64_t fastclock_mono_coarse_ns(void)
{
    int64_t v = atomic_load_explicit(&fc_coarse.mono, memory_order_acquire);
    if (FC_LIKELY(v != 0))
        return v;
    return coarse_slow(FC_MONO);
}

FC_API int64_t fastclock_real_coarse_ns(void)
{
    if (FC_LIKELY(atomic_load_explicit(&fc_coarse.mono, memory_order_acquire) != 0))
        return atomic_load_explicit(&fc_coarse.real, memory_order_relaxed);
    return coarse_slow(FC_REAL);
}

/* ---------------------------------------------------------------- ticks */

FC_API uint64_t fastclock_ticks(void)
{
    int mode = atomic_load_explicit(&fc_mode, memory_order_relaxed);
    if (FC_LIKELY(mode == FC_MODE_TSC && !fc_seam.counter))
        return fc_counter_unordered();
    if (mode == FC_MODE_UNINIT) {
        fc_try_init();
        return fastclock_ticks();
    }
    if (fc_seam.counter && mode == FC_MODE_TSC)
        return fc_seam.counter();
    /* Counters of different CPUs disagree: ticks are ns of the per-CPU clock. */
    if (mode == FC_MODE_PERCPU)
        return (uint64_t)fc_percpu_read(FC_MONO);
    /* Mode system: ticks are nanoseconds of CLOCK_MONOTONIC. */
    return (uint64_t)fc_kernel_ns(CLOCK_MONOTONIC);
}

FC_API int64_t fastclock_ticks_to_ns(uint64_t ticks)
{
    if (atomic_load_explicit(&fc_mode, memory_order_relaxed) == FC_MODE_UNINIT)
        fc_try_init();
    /* Same unit as fastclock_ticks: counter ticks in mode tsc, else ns. */
    if (atomic_load_explicit(&fc_mode, memory_order_acquire) != FC_MODE_TSC)
        return (int64_t)ticks;
    return fc_cal_ticks_to_ns((int64_t)ticks);
}

/* ---------------------------------------------------------------- POSIX shapes */

FC_API int fastclock_gettime(clockid_t id, struct timespec *ts)
{
    int64_t ns, rem;
    enum fc_kind kind;
    if (FC_UNLIKELY(!ts)) {
        /* libc would crash in the vDSO; the kernel says EINVAL or EFAULT. */
        if (fc_seam.kernel_gettime)
            return fc_seam.kernel_gettime(id, ts);
        return (int)syscall(SYS_clock_gettime, id, ts);
    }
    switch (id) {
    case CLOCK_MONOTONIC: kind = FC_MONO; ns = fc_read(FC_MONO, 1); break;
    case CLOCK_REALTIME: kind = FC_REAL; ns = fc_read(FC_REAL, 1); break;
    case CLOCK_MONOTONIC_COARSE: kind = FC_MONO; ns = fastclock_mono_coarse_ns(); break;
    case CLOCK_REALTIME_COARSE: kind = FC_REAL; ns = fastclock_real_coarse_ns(); break;
    case CLOCK_BOOTTIME: kind = FC_BOOT; ns = fc_read(FC_BOOT, 1); break;
    case CLOCK_TAI: kind = FC_TAI; ns = fc_read(FC_TAI, 1); break;
    default: return fc_kernel_gettime(id, ts);
    }
    ts->tv_sec = (time_t)fc_split_seconds(kind, ns, &rem);
    ts->tv_nsec = (long)rem;
    return 0;
}

FC_API int fastclock_gettimeofday(struct timeval *tv, void *tz)
{
    if (FC_UNLIKELY(tz != 0))
        return fc_kernel_gettimeofday(tv, tz); /* the kernel's timezone, and its time */
    if (!tv)
        return 0;
    int64_t rem;
    tv->tv_sec = (time_t)fc_split_seconds(FC_REAL, fc_read(FC_REAL, 1), &rem);
    tv->tv_usec = (suseconds_t)(rem / 1000);
    return 0;
}

/* ---------------------------------------------------------------- status */

/* The kernel's sync state, sampled at most once a second from here (the
 * calibrator samples it every 50 ms; without one, this is the only source). */
static void fresh_sync(int64_t mono_now, struct fc_sync_snapshot *ks)
{
    fc_sync_get(mono_now, ks);
    if (!ks->known || ks->age_ns > FC_NS_PER_SEC) {
        fc_sync_poll(mono_now);
        fc_sync_get(mono_now, ks);
    }
}

/* fastclock's own bound against the kernel's clock, now. */
static int64_t own_bound(int mode, int64_t mono_now)
{
    if (mode == FC_MODE_PERCPU) {
        struct fc_percpu_stats ps;
        fc_percpu_stats(&ps);
        return ps.max_bound_ns;
    }
    if (mode != FC_MODE_TSC)
        return 0;
    struct fc_full f;
    snapshot_full(&f, 1);
    return f.l.mult ? fc_meta_bound(&f.m, mono_now) : 0;
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
    struct fc_sync_snapshot ks;
    fresh_sync(mono, &ks);
    /* Unknown kernel state: assume the worst an unsynchronised clock reports. */
    int64_t kernel_err = ks.known ? ks.maxerror_ns : 16LL * FC_NS_PER_SEC;
    int64_t e = own_bound(mode, mono) + kernel_err;
    *earliest_ns = real - e;
    *latest_ns = real + e;
    return ks.known && ks.synchronized ? 0 : 1;
}

FC_API int fastclock_status(struct fastclock_status *out)
{
    if (!out) {
        errno = EFAULT;
        return -1;
    }
    memset(out, 0, sizeof *out);
    if (atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_UNINIT)
        fc_try_init();
    /* Another thread may be mid-decision (well under a millisecond): wait
     * for it, but never on the deciding thread itself (a signal handler that
     * interrupted the decision), and never forever. */
    for (int i = 0; i < 20000 && fc_init_in_progress_elsewhere(); i++)
        i < 1000 ? fc_cpu_relax() : (void)sched_yield();

    int mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
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
    out->reason = fc_get_reason();
    out->forced = fc_mode_forced();
    out->ordered = mode != FC_MODE_SYSTEM;
    out->calibrations = st.calibrations;
    out->fallback_reads = atomic_load_explicit(&fallback_reads, memory_order_relaxed);
    out->realtime_steps = st.realtime_steps;
    out->last_calibration_age_ns = -1;
    out->max_warp_cycles = ps.max_warp_cycles;
    fc_measured_costs(&out->read_ns, &out->kernel_read_ns);
    out->last_error_ns = st.last_err_ns;
    out->max_error_ns = st.max_err_ns;
    out->sample_width_ns = st.last_width_ns;
    if (mode == FC_MODE_TSC && f.l.mult != 0) {
        out->counter = "rdtsc";
        out->calibrator = fc_calibrator_running() ? "thread" : "lazy";
        out->counter_hz = st.rate_ns_per_tick > 0 ? 1e9 / st.rate_ns_per_tick : 0;
        out->calibration_interval_ns = st.interval_ns;
        out->last_calibration_age_ns = now - f.m.published_mono_ns;
        if (out->last_calibration_age_ns < 0)
            out->last_calibration_age_ns = 0;
    } else if (mode == FC_MODE_PERCPU) {
        out->counter = "rdtscp";
        out->calibrator = fc_calibrator_running() ? "thread" : "lazy";
        out->counter_hz = ps.mean_hz;
        out->cpus_calibrated = ps.calibrated;
        out->calibration_interval_ns = fc_percpu_interval_ns();
    } else {
        out->counter = "clock_gettime";
        out->calibrator = "none";
        out->counter_hz = 1e9;
    }
    out->error_bound_ns = own_bound(mode, now);
    struct fc_sync_snapshot ks;
    fresh_sync(now, &ks);
    out->kernel_synchronized = ks.known ? ks.synchronized : -1;
    out->kernel_maxerror_ns = ks.known ? ks.maxerror_ns : -1;
    out->kernel_esterror_ns = ks.known ? ks.esterror_ns : -1;
    out->real_error_bound_ns = out->error_bound_ns + (ks.known ? ks.maxerror_ns : 16LL * FC_NS_PER_SEC);
    return 0;
}

FC_API const char *fastclock_version(void)
{
    return "0.1.0";
}
