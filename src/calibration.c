/*
 * Calibration: keep a line (counter -> CLOCK_MONOTONIC) that tracks the
 * kernel, which NTP may slew, and publish it without ever making time go
 * backwards.
 *
 * Sampling.  A sample brackets one kernel read between two ordered counter
 * reads and keeps the tightest of several tries, so its error is half a
 * bracket (~15 ns with the vDSO).  The REALTIME, BOOTTIME and TAI offsets
 * are integers in the kernel; intersecting the brackets of a few tries
 * pins them to a few ns.
 *
 * Rate.  The slope over a history of samples (up to 16, several seconds),
 * restarted when the newest sample does not fit the long-term slope (NTP
 * changed the kernel's frequency, a VM migrated, the machine suspended).
 * Until the baseline is long, the interval between calibrations grows with
 * it (100 us, 200 us, ... up to 0.5 s), so the error stays near the
 * sampling noise instead of a 20 ms start-up measurement.
 *
 * Correction.  Never a step back.  Like absl/time/clock.cc, a new line
 * starts where the old one is and slews toward the kernel by the next
 * calibration, at most 500 ppm.  Being behind by more than 1 us is fixed
 * by a forward step.  The new line's pivot (where it meets the old one) is
 * chosen so that a reader still using the old line cannot get a later value
 * than one using the new line:
 *   - steeper line: pivot in the past (before publication),
 *   - shallower line: pivot in the future (after publication),
 * and the pivot is kept exactly in 40-bit fixed point, so continuity holds
 * to the bit.
 *
 * Who calibrates.  A background thread where one is allowed (it also wakes
 * immediately on a REALTIME step through a timerfd with
 * TFD_TIMER_CANCEL_ON_SET, polls adjtimex for NTP frequency changes and
 * feeds the coarse clocks); otherwise readers that find the line due take a
 * try-lock and recalibrate inline.  Lazy calibration is what keeps the
 * library correct where a thread cannot be: in a forked child (POSIX allows
 * no thread creation there before exec), in the preload shim (a thread in
 * every process would break programs that must stay single-threaded, e.g.
 * for unshare(CLONE_NEWUSER)), when the first read comes from a signal
 * handler, or when the thread is starved.  Both paths run the same code
 * under the same lock, and readers never wait for it.
 */
#define _GNU_SOURCE
#include "calibration.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/timex.h>
#include <unistd.h>

#include "fmt.h"
#include "mode.h"

#define FC_HIST 16
#define FC_MAX_SLEW 500e-6
#define FC_MIN_INTERVAL_NS 100000LL        /* first refinements: 100 us */
#define FC_JUMP_NS 1000LL                  /* behind by more: step forward */
#define FC_TARGET_ERR_NS 100.0             /* spans are cut so drift stays below this */
#define FC_MAX_BOUND_NS 1000.0             /* ... and below this before the kernel takes over */
#define FC_PAST_MARGIN_NS 2000.0           /* pivot before publication, beyond any speculation */
#define FC_MAX_WIDTH_NS 50000.0            /* a wider bracket is not a sample */
#define FC_SAMPLE_TRIES 8
#define FC_SUSPEND_NS 1000000LL            /* BOOTTIME - MONOTONIC growth that means a suspend */

int64_t fc_cal_max_interval_ns = 500000000LL;

static _Atomic int cal_lock;

/* Writer state: touched only with cal_lock held. */
static struct {
    struct fc_sample hist[FC_HIST];
    int n;
    double rate;      /* ns per tick */
    double rate_unc;  /* relative 1-sigma-ish uncertainty of rate */
    int64_t interval_ns;
    int noisy_in_a_row;
    int resets_recent;
    int64_t last_reset_mono;
} cal;

/* Set by the thread when adjtimex shows NTP steering: keep intervals short until then (mono ns). */
static _Atomic int64_t kernel_slewing_until;

/* Published statistics (relaxed atomics: status may read them anytime). */
static struct {
    _Atomic uint64_t calibrations;
    _Atomic int64_t last_err_ns, max_err_ns, last_width_ns, interval_ns;
    _Atomic uint64_t realtime_steps, rate_resets;
    _Atomic double rate;
} stats;

/* For fastclock_ticks_to_ns: the latest rate in fixed point, or 0. */
static _Atomic int64_t ticks_mult;

int fc_cal_trylock(void)
{
    int expected = 0;
    return atomic_compare_exchange_strong_explicit(&cal_lock, &expected, 1, memory_order_acquire,
                                                   memory_order_relaxed);
}

void fc_cal_unlock(void)
{
    atomic_store_explicit(&cal_lock, 0, memory_order_release);
}

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }
/* llround without libm (the library depends on libc and pthreads only). */
static double fc_fabs(double x) { return x < 0 ? -x : x; }
static int64_t round64(double x) { return (int64_t)(x < 0 ? x - 0.5 : x + 0.5); }

/* ------------------------------------------------------------------ sampling */

static void intersect(int64_t lo, int64_t hi, int64_t *acc_lo, int64_t *acc_hi)
{
    int64_t nl = lo > *acc_lo ? lo : *acc_lo, nh = hi < *acc_hi ? hi : *acc_hi;
    if (nl > nh) { /* the offset changed between tries (a step): keep the newest */
        *acc_lo = lo;
        *acc_hi = hi;
    } else {
        *acc_lo = nl;
        *acc_hi = nh;
    }
}

int fc_cal_sample(struct fc_sample *s, int tries)
{
    uint64_t best = UINT64_MAX;
    memset(s, 0, sizeof *s);
    for (int i = 0; i < tries; i++) {
        struct timespec ts;
        uint64_t t0 = fc_now_counter(1);
        if (fc_kernel_gettime(CLOCK_MONOTONIC, &ts) != 0)
            return FC_SAMPLE_ERROR;
        uint64_t t1 = fc_now_counter(1);
        if (t1 < t0)
            return FC_SAMPLE_BACKWARDS;
        if (t1 - t0 < best) {
            best = t1 - t0;
            s->t0 = t0;
            s->t = t0 + (t1 - t0) / 2;
            s->width = t1 - t0;
            s->mono = fc_ts_to_ns(&ts);
        }
    }

    /* Each offset sits in its own symmetric bracket (M R M, M B M) so the
     * midpoint is unbiased when the calls take equal time. */
    int64_t rlo = INT64_MIN, rhi = INT64_MAX, blo = INT64_MIN, bhi = INT64_MAX;
    int boot_ok = 1;
    s->tai_ok = 1;
    for (int i = 0; i < 3; i++) {
        struct timespec m1, r, m2, b, m3, ta;
        if (fc_kernel_gettime(CLOCK_MONOTONIC, &m1) || fc_kernel_gettime(CLOCK_REALTIME, &r) ||
            fc_kernel_gettime(CLOCK_MONOTONIC, &m2))
            return FC_SAMPLE_ERROR;
        int64_t M1 = fc_ts_to_ns(&m1), M2 = fc_ts_to_ns(&m2), R = fc_ts_to_ns(&r);
        intersect(R - M2, R - M1, &rlo, &rhi);
        if (boot_ok && fc_kernel_gettime(CLOCK_BOOTTIME, &b) == 0 &&
            fc_kernel_gettime(CLOCK_MONOTONIC, &m3) == 0) {
            int64_t B = fc_ts_to_ns(&b), M3 = fc_ts_to_ns(&m3);
            intersect(B - M3, B - M2, &blo, &bhi);
        } else {
            boot_ok = 0;
        }
        if (i == 0) {
            /* TAI - REALTIME is a whole number of seconds: one read pins it. */
            if (fc_kernel_gettime(CLOCK_TAI, &ta) == 0) {
                double d = (double)(fc_ts_to_ns(&ta) - R) / 1e9;
                s->tai_off = round64(d) * FC_NS_PER_SEC;
            } else {
                s->tai_ok = 0;
            }
        }
    }
    s->real_off = rlo + (rhi - rlo) / 2;
    s->boot_off = boot_ok ? blo + (bhi - blo) / 2 : 0;
    s->offsets_ok = 1;
    return FC_SAMPLE_OK;
}

/* ------------------------------------------------------------------ lines */

static void publish(const struct fc_line *l, const struct fc_meta *m)
{
    uint64_t seq = atomic_load_explicit(&fc_latch.seq, memory_order_relaxed);
    unsigned next = (unsigned)((seq + 1) & 1);
    const uint64_t *src = (const uint64_t *)l;
    uint64_t *dst = (uint64_t *)&fc_latch.line[next];
    for (unsigned i = 0; i < sizeof *l / 8; i++)
        __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
    src = (const uint64_t *)m;
    dst = (uint64_t *)&fc_latch.meta[next];
    for (unsigned i = 0; i < sizeof *m / 8; i++)
        __atomic_store_n(&dst[i], src[i], __ATOMIC_RELAXED);
    atomic_store_explicit(&fc_latch.seq, seq + 1, memory_order_release);
}

static __int128 line_fixed(const struct fc_line *l, int64_t d)
{
    return fc_eval_fixed(l->base_ns, l->base_frac, l->mult, d);
}

static int64_t fixed_to_ns(__int128 v) { return (int64_t)(v >> FC_SHIFT); }
static __int128 ns_to_fixed(int64_t ns) { return (__int128)ns << FC_SHIFT; }

void fc_cal_publish_system(int64_t floor_ns)
{
    uint64_t seq = atomic_load_explicit(&fc_latch.seq, memory_order_relaxed);
    struct fc_line l;
    struct fc_meta m;
    memset(&l, 0, sizeof l);
    memset(&m, 0, sizeof m);
    l.real_offset = fc_latch.line[seq & 1].real_offset;
    l.boot_offset = fc_latch.line[seq & 1].boot_offset;
    m.floor_ns = floor_ns;
    m.epoch = fc_latch.meta[seq & 1].epoch + 1;
    publish(&l, &m);
    atomic_store_explicit(&ticks_mult, 0, memory_order_relaxed);
}

void fc_cal_fail_to_system(const char *reason)
{
    uint64_t seq = atomic_load_explicit(&fc_latch.seq, memory_order_relaxed);
    const struct fc_line *cur = &fc_latch.line[seq & 1];
    const struct fc_meta *cm = &fc_latch.meta[seq & 1];
    int64_t floor = cm->floor_ns;
    if (cur->mult != 0) {
        /* Anything the line returned is below both its end and kernel + bound. */
        int64_t k = fc_kernel_ns(CLOCK_MONOTONIC);
        int64_t end = fixed_to_ns(line_fixed(cur, (int64_t)cm->soft_span));
        int64_t cap = k + cm->error_bound_ns + 1;
        int64_t f = end < cap ? end : cap;
        if (f > floor)
            floor = f;
    }
    fc_set_reason(reason);
    fc_cal_publish_system(floor);
    atomic_store_explicit(&fc_mode, FC_MODE_SYSTEM, memory_order_release);
    fc_calibrator_wake();
}

/* Sample noise in ns: half the bracket plus the kernel's own resolution. */
static double sigma_ns(const struct fc_sample *s, double rate)
{
    return (double)s->width * rate * 0.5 + 1.0;
}

static void history_push(const struct fc_sample *s)
{
    if (cal.n == FC_HIST) {
        memmove(&cal.hist[0], &cal.hist[1], (FC_HIST - 1) * sizeof cal.hist[0]);
        cal.n--;
    }
    cal.hist[cal.n++] = *s;
}

/* Slope of the history; restarts it when the newest sample does not fit. */
static void update_rate(void)
{
    if (cal.n < 2)
        return;
    const struct fc_sample *last = &cal.hist[cal.n - 1], *prev = &cal.hist[cal.n - 2];
    const double r = cal.rate;
    if (cal.n >= 3) {
        const struct fc_sample *first = &cal.hist[0];
        double r_long = (double)(prev->mono - first->mono) / (double)(prev->t - first->t);
        double predicted = (double)prev->mono + r_long * (double)(last->t - prev->t);
        double residual = (double)last->mono - predicted;
        double tol = 4.0 * (sigma_ns(last, r) + sigma_ns(prev, r) + sigma_ns(first, r)) + 5.0;
        if (fc_fabs(residual) > tol) {
            /* The kernel's rate changed somewhere since the previous sample.
             * The slope across it is the best guess for now; restart the
             * history from here so intervals ramp up again from 100 us, as
             * at start-up, and the new rate is known precisely within ms. */
            double mixed = (double)(last->mono - prev->mono) / (double)(last->t - prev->t);
            cal.hist[0] = *last;
            cal.n = 1;
            cal.rate = mixed;
            cal.rate_unc = 1e-3;
            atomic_fetch_add_explicit(&stats.rate_resets, 1, memory_order_relaxed);
            return;
        }
    }
    const struct fc_sample *first = &cal.hist[0];
    double span = (double)(last->t - first->t);
    double est = (double)(last->mono - first->mono) / span;
    double unc = (sigma_ns(first, r) + sigma_ns(last, r)) / (span * est);
    /* A CPUID seed may beat a short baseline: keep whichever is better
     * known, unless the two disagree (then the seed was wrong). */
    if (unc < cal.rate_unc || fc_fabs(est / cal.rate - 1.0) > 3.0 * (unc + cal.rate_unc)) {
        cal.rate = est;
        cal.rate_unc = unc;
    }
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* How the next line relates to the current one. */
enum build_kind {
    BUILD_CONTINUE,  /* the normal case */
    BUILD_FIRST,     /* no line was ever used */
    BUILD_RESUMED,   /* after a suspend: every read of the old line came before it */
};

/* Build the next line from sample s and publish it. */
static void build_and_publish(const struct fc_sample *s, enum build_kind kind)
{
    const int restart = kind != BUILD_CONTINUE;
    const double rate = cal.rate;
    const int64_t mult_k = round64(rate * (double)((int64_t)1 << FC_SHIFT));
    const uint64_t seq = atomic_load_explicit(&fc_latch.seq, memory_order_relaxed);
    const struct fc_line *cur = &fc_latch.line[seq & 1];
    const struct fc_meta *cm = &fc_latch.meta[seq & 1];
    const int has_line = cur->mult != 0;

    /* Interval: the baseline so far, between 100 us and the maximum. */
    int64_t baseline_ns = cal.n >= 2 ? (int64_t)((double)(cal.hist[cal.n - 1].t - cal.hist[0].t) * rate) : 0;
    int64_t max_iv = fc_cal_max_interval_ns;
    if (atomic_load_explicit(&kernel_slewing_until, memory_order_relaxed) > s->mono && max_iv > 50000000LL)
        max_iv = 50000000LL;
    int64_t interval = clamp64(baseline_ns, FC_MIN_INTERVAL_NS, max_iv);
    cal.interval_ns = interval;

    /* Span: how long readers may use the line.  The thread refreshes it
     * every interval; past soft_span a reader recalibrates or asks the
     * kernel.  It is cut so that rate uncertainty cannot grow the error past
     * the target. */
    double unc_ns_per_ns = cal.rate_unc > 1e-12 ? cal.rate_unc : 1e-12;
    int thread = fc_calibrator_running();
    double soft_ns = thread ? 2.0 * (double)interval + 20e6 : (double)interval;
    if (soft_ns > FC_TARGET_ERR_NS / unc_ns_per_ns) soft_ns = FC_TARGET_ERR_NS / unc_ns_per_ns;
    if (soft_ns < (double)interval) soft_ns = (double)interval;

    const int64_t past = (int64_t)(FC_PAST_MARGIN_NS / rate) + 1;
    /* Remaining error is slewed away by the next calibration (deadbeat):
     * noise cannot build up, and a real error is gone within one interval
     * unless the 500 ppm limit makes it take longer. */
    double horizon_ns = (double)interval;

    struct fc_line l;
    struct fc_meta m;
    int64_t err_at_pivot_ns = 0;
    int64_t measured_err = 0;
    int measured = 0;

    for (int attempt = 0;; attempt++) {
        const uint64_t now = fc_now_counter(1);
        uint64_t P = now - (uint64_t)past;
        /* Still in use?  Then continue it exactly.  If not, it was never
         * read past its end (F) and readers since had the kernel's values. */
        int valid = has_line && !restart && (uint64_t)(now - cur->base_tsc) < cm->soft_span;
        uint64_t F = 0;
        if (!valid && has_line && kind != BUILD_FIRST) {
            uint64_t used = (uint64_t)(now - cur->base_tsc);
            F = cur->base_tsc + (used < cm->soft_span ? used : cm->soft_span);
            /* Start the new line no earlier than F, so "at or above what the
             * old line returned" is checked where both lines are evaluated. */
            if ((int64_t)(F - P) > 0)
                P = F;
        }
        uint64_t pivot = P;
        __int128 base, kp;
        int64_t mult;
        /* Kernel prediction K(t) = mono + rate * (t - s.t). */
#define KFIX(at) (ns_to_fixed(s->mono) + (__int128)mult_k * (int64_t)((at) - s->t))
        kp = KFIX(P);
        int jumped = 0;

        if (has_line && !restart && (uint64_t)(s->t - cur->base_tsc) < 2 * cm->soft_span) {
            measured_err = fixed_to_ns(line_fixed(cur, (int64_t)(s->t - cur->base_tsc)) - KFIX(s->t));
            measured = 1;
        }

        if (!valid) {
            /* Readers may have had kernel values: start at or above the
             * kernel (anchored at the bracket start), and at or above what
             * the old line can have returned. */
            base = kp + (__int128)mult_k * (int64_t)(s->t - s->t0);
            if (has_line && kind != BUILD_FIRST) {
                /* Nothing the old line returned exceeds its value at F --
                 * even if the kernel changed rate under it and it ran ahead. */
                __int128 floor = line_fixed(cur, (int64_t)(F - cur->base_tsc));
                if (kind == BUILD_RESUMED) {
                    /* Its reads all came before the suspend, when it was within
                     * its bound of a kernel time that has not run backwards. */
                    __int128 cap = kp + ns_to_fixed(cm->error_bound_ns + 1);
                    if (cap < floor)
                        floor = cap;
                }
                if (floor > base)
                    base = floor;
            }
        } else {
            base = line_fixed(cur, (int64_t)(P - cur->base_tsc));
            if (base - kp < -ns_to_fixed(FC_JUMP_NS)) {
                /* Far behind: step forward (never back).  The new line stays
                 * above the old one for milliseconds, far beyond any reader
                 * still on the old line, so no pivot is needed. */
                base = kp;
                jumped = 1;
            }
        }
        __int128 e = base - kp;
        err_at_pivot_ns = fixed_to_ns(e);
        double h = horizon_ns;
        if (fc_fabs((double)err_at_pivot_ns) / FC_MAX_SLEW > h)
            h = fc_fabs((double)err_at_pivot_ns) / FC_MAX_SLEW;
        int64_t h_ticks = (int64_t)(h / rate) + 1;
        mult = mult_k - (int64_t)(e / h_ticks);

        if (valid && !jumped && mult < cur->mult) {
            /* Shallower than the old line: meet it at a pivot after the
             * publication, so no reader of the old line sees a later time. */
            double rel = (double)(cur->mult - mult) / (double)cur->mult;
            double ahead_ns = 5.0 / (rel > 1e-15 ? rel : 1e-15);
            if (ahead_ns < 20e3) ahead_ns = 20e3;
            if (ahead_ns > 10e6) ahead_ns = 10e6;
            pivot = now + (uint64_t)(ahead_ns / rate);
            base = line_fixed(cur, (int64_t)(pivot - cur->base_tsc));
            e = base - KFIX(pivot);
            mult = mult_k - (int64_t)(e / h_ticks);
            if (mult > cur->mult)
                mult = cur->mult;
            err_at_pivot_ns = fixed_to_ns(e);
        }
#undef KFIX
        /* Store the line at P (<= publication) so readers' deltas are >= 0. */
        __int128 base_p = base - (__int128)mult * (int64_t)(pivot - P);
        memset(&l, 0, sizeof l);
        memset(&m, 0, sizeof m);
        l.base_tsc = P;
        l.mult = mult;
        l.base_ns = (int64_t)(base_p >> FC_SHIFT);
        l.base_frac = (uint64_t)(base_p - ((__int128)l.base_ns << FC_SHIFT));
        m.soft_span = (uint64_t)(soft_ns / rate) + (uint64_t)past;
        l.fast_span = fc_seam.counter ? 0 : m.soft_span;
        if (s->offsets_ok) {
            l.real_offset = s->real_off;
            l.boot_offset = s->boot_off;
            l.tai_offset = s->tai_ok ? s->tai_off : 0;
        } else {
            l.real_offset = cur->real_offset;
            l.boot_offset = cur->boot_offset;
            l.tai_offset = cur->tai_offset;
        }
        double bound = fc_fabs((double)err_at_pivot_ns) + 2.0 * sigma_ns(s, rate) +
                       unc_ns_per_ns * soft_ns + 2.0;
        m.error_bound_ns = (int64_t)bound + 1;
        m.epoch = cm->epoch + 1;
        m.published_mono_ns = s->mono;

        /* A pivot in the future must still be ahead when readers can see the line. */
        if (pivot != P && fc_now_counter(1) + (uint64_t)past >= pivot && attempt < 3)
            continue;
        break;
    }

    if (has_line && s->offsets_ok && abs64(s->real_off - cur->real_offset) > 1000)
        atomic_fetch_add_explicit(&stats.realtime_steps, 1, memory_order_relaxed);
    publish(&l, &m);

    atomic_store_explicit(&ticks_mult, mult_k, memory_order_relaxed);
    atomic_fetch_add_explicit(&stats.calibrations, 1, memory_order_relaxed);
    if (measured) {
        atomic_store_explicit(&stats.last_err_ns, measured_err, memory_order_relaxed);
        if (abs64(measured_err) > atomic_load_explicit(&stats.max_err_ns, memory_order_relaxed))
            atomic_store_explicit(&stats.max_err_ns, abs64(measured_err), memory_order_relaxed);
    }
    atomic_store_explicit(&stats.last_width_ns, (int64_t)((double)s->width * rate), memory_order_relaxed);
    atomic_store_explicit(&stats.interval_ns, interval, memory_order_relaxed);
    atomic_store_explicit(&stats.rate, rate, memory_order_relaxed);
}

/* ------------------------------------------------------------------ entry points */

int fc_cal_start(double seed_hz, const char *seed_source, char *why, size_t why_size)
{
    struct fc_buf b;
    fc_buf_init(&b, why, why_size);
    struct fc_sample s0, s1;
    int r = fc_cal_sample(&s0, FC_SAMPLE_TRIES);
    if (r == FC_SAMPLE_ERROR) {
        fc_buf_str(&b, "the kernel's CLOCK_MONOTONIC could not be read");
        return -1;
    }
    if (r == FC_SAMPLE_BACKWARDS) {
        fc_buf_str(&b, "the time-stamp counter went backwards between two reads");
        return -1;
    }
    /* Measure the rate over >= 20 us (50 us without a seed) against the
     * kernel; a CPUID seed is kept when it agrees, since it is more precise
     * than a short measurement. */
    double min_ns = seed_hz > 0 ? 20e3 : 50e3;
    struct timespec ts0;
    fc_kernel_gettime(CLOCK_MONOTONIC, &ts0);
    int64_t start_ns = fc_ts_to_ns(&ts0);
    for (int spins = 0;; spins++) {
        struct timespec ts;
        fc_kernel_gettime(CLOCK_MONOTONIC, &ts);
        if (fc_ts_to_ns(&ts) - start_ns >= (int64_t)min_ns)
            break;
        if (spins > 10000000) {
            fc_buf_str(&b, "CLOCK_MONOTONIC does not advance");
            return -1;
        }
        fc_cpu_relax();
    }
    r = fc_cal_sample(&s1, FC_SAMPLE_TRIES);
    if (r != FC_SAMPLE_OK || s1.t <= s0.t) {
        fc_buf_str(&b, r == FC_SAMPLE_OK || r == FC_SAMPLE_BACKWARDS
                           ? "the time-stamp counter went backwards between two calibration samples"
                           : "the kernel's clocks could not be read");
        return -1;
    }
    double measured = (double)(s1.mono - s0.mono) / (double)(s1.t - s0.t);
    double w0 = (double)s0.width * measured, w1 = (double)s1.width * measured;
    if (w0 > FC_MAX_WIDTH_NS || w1 > FC_MAX_WIDTH_NS) {
        fc_buf_str(&b, "calibration cannot converge: every read of the kernel clock took over ");
        fc_buf_fixed(&b, (w0 > w1 ? w0 : w1) / 1000.0, 1);
        fc_buf_str(&b, " us (the machine is too busy or the kernel clock is a slow device)");
        return -1;
    }
    if (!(measured > 0) || measured > 1e6) {
        fc_buf_str(&b, "the counter's rate against CLOCK_MONOTONIC is not plausible");
        return -1;
    }
    double unc = (w0 + w1) * 0.5 / (double)(s1.mono - s0.mono);
    cal.n = 0;
    cal.rate = measured;
    cal.rate_unc = unc;
    if (seed_hz > 0) {
        double seed = 1e9 / seed_hz;
        /* 0x16 is only the base frequency: trust it to 0.1%; exact leaves to 2 ppm. */
        double seed_unc = strstr(seed_source, "0x16") ? 1e-3 : 2e-6;
        if (fc_fabs(seed / measured - 1.0) < 3.0 * unc + seed_unc && seed_unc < unc) {
            cal.rate = seed;
            cal.rate_unc = seed_unc;
        }
    }
    history_push(&s0);
    history_push(&s1);
    cal.noisy_in_a_row = 0;
    cal.resets_recent = 0;
    build_and_publish(&s1, BUILD_FIRST);
    return 0;
}

/* Large rate jumps in a short time mean the counter cannot be trusted. */
static int note_reset_and_check(int64_t mono_now)
{
    if (mono_now - cal.last_reset_mono > 60LL * FC_NS_PER_SEC)
        cal.resets_recent = 0;
    cal.last_reset_mono = mono_now;
    return ++cal.resets_recent > 5;
}

int fc_cal_recalibrate(void)
{
    struct fc_sample s;
    int r = fc_cal_sample(&s, FC_SAMPLE_TRIES);
    if (r == FC_SAMPLE_BACKWARDS) {
        fc_cal_fail_to_system("the time-stamp counter went backwards between two ordered reads");
        return -1;
    }
    if (r != FC_SAMPLE_OK) {
        if (++cal.noisy_in_a_row > 50)
            fc_cal_fail_to_system("the kernel's clocks could not be read for calibration");
        return -1;
    }
    double width_ns = (double)s.width * cal.rate;
    if (width_ns > FC_MAX_WIDTH_NS) {
        /* Preempted in every try.  Keep the line; give up only if it lasts. */
        if (++cal.noisy_in_a_row > 50) {
            fc_cal_fail_to_system("calibration cannot converge: reads of the kernel clock are "
                                  "too slow or too often interrupted");
        }
        return -1;
    }
    cal.noisy_in_a_row = 0;

    const struct fc_sample *last = &cal.hist[cal.n - 1];
    int suspended = s.offsets_ok && last->offsets_ok && s.boot_off - last->boot_off > FC_SUSPEND_NS;
    if (s.t <= last->t) {
        if (!suspended) {
            fc_cal_fail_to_system("the time-stamp counter went backwards between calibrations: "
                                  "counters are not synchronised across CPUs or were reset");
            return -1;
        }
    }
    if (suspended) {
        /* The kernel's MONOTONIC stood still while the counter stopped, reset
         * or ran on: the history is meaningless across it. */
        cal.n = 0;
        history_push(&s);
        atomic_fetch_add_explicit(&stats.rate_resets, 1, memory_order_relaxed);
        build_and_publish(&s, BUILD_RESUMED);
        return 0;
    }

    uint64_t resets_before = atomic_load_explicit(&stats.rate_resets, memory_order_relaxed);
    history_push(&s);
    double old_rate = cal.rate;
    update_rate();
    if (atomic_load_explicit(&stats.rate_resets, memory_order_relaxed) != resets_before) {
        double jump = fc_fabs(cal.rate / old_rate - 1.0);
        if (jump > 0.05 || (jump > 1e-3 && note_reset_and_check(s.mono))) {
            fc_cal_fail_to_system("the counter's rate keeps changing against CLOCK_MONOTONIC "
                                  "(it is not invariant in practice)");
            return -1;
        }
    }
    build_and_publish(&s, BUILD_CONTINUE);
    return 0;
}

void fc_cal_stats(struct fc_cal_stats *out)
{
    out->calibrations = atomic_load_explicit(&stats.calibrations, memory_order_relaxed);
    out->last_err_ns = atomic_load_explicit(&stats.last_err_ns, memory_order_relaxed);
    out->max_err_ns = atomic_load_explicit(&stats.max_err_ns, memory_order_relaxed);
    out->last_width_ns = atomic_load_explicit(&stats.last_width_ns, memory_order_relaxed);
    out->interval_ns = atomic_load_explicit(&stats.interval_ns, memory_order_relaxed);
    out->realtime_steps = atomic_load_explicit(&stats.realtime_steps, memory_order_relaxed);
    out->rate_resets = atomic_load_explicit(&stats.rate_resets, memory_order_relaxed);
    out->rate_ns_per_tick = atomic_load_explicit(&stats.rate, memory_order_relaxed);
}

int64_t fc_cal_ticks_to_ns(int64_t ticks)
{
    int64_t mult = atomic_load_explicit(&ticks_mult, memory_order_relaxed);
    return (int64_t)(((__int128)ticks * mult) >> FC_SHIFT);
}

/* ------------------------------------------------------------------ the thread */

static pthread_t cal_thread;
static _Atomic int thread_running;   /* 1 while the thread serves this process */
static _Atomic int thread_stop;
static _Atomic int coarse_wanted;
static int wake_fd = -1;

int fc_calibrator_running(void)
{
    return atomic_load_explicit(&thread_running, memory_order_relaxed);
}

void fc_calibrator_wake(void)
{
    int fd = wake_fd;
    if (fd >= 0 && fc_calibrator_running()) {
        uint64_t one = 1;
        ssize_t r = write(fd, &one, sizeof one);
        (void)r;
    }
}

void fc_coarse_request(void)
{
    if (!atomic_load_explicit(&coarse_wanted, memory_order_relaxed)) {
        atomic_store_explicit(&coarse_wanted, 1, memory_order_relaxed);
        fc_calibrator_wake();
    }
}

static void coarse_update(void)
{
    int64_t real = fastclock_real_ns();
    int64_t mono = fastclock_mono_ns();
    atomic_store_explicit(&fc_coarse.real, real, memory_order_relaxed);
    atomic_store_explicit(&fc_coarse.mono, mono, memory_order_release);
}

void fc_coarse_deactivate(void)
{
    /* Readers fall back to the kernel's coarse clocks, clamped at the last value. */
    int64_t last = atomic_load_explicit(&fc_coarse.mono, memory_order_relaxed);
    if (last > atomic_load_explicit(&fc_coarse.floor_mono, memory_order_relaxed))
        atomic_store_explicit(&fc_coarse.floor_mono, last, memory_order_relaxed);
    atomic_store_explicit(&fc_coarse.mono, 0, memory_order_release);
}

static void arm_clock_set_timer(int tfd)
{
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    its.it_value.tv_sec = (time_t)1 << 40; /* never fires; only cancellation matters */
    timerfd_settime(tfd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &its, 0);
}

/* adjtimex state that changes the kernel's rate. */
struct kernel_rate_state {
    long freq, tick, offset;
    int status;
};

static int read_kernel_rate(struct kernel_rate_state *k)
{
    struct timex tx;
    memset(&tx, 0, sizeof tx);
    if (adjtimex(&tx) < 0)
        return -1;
    k->freq = tx.freq;
    k->tick = tx.tick;
    k->status = tx.status;
    k->offset = (tx.status & STA_PLL) ? tx.offset : 0;
    memset(&tx, 0, sizeof tx);
    tx.modes = ADJ_OFFSET_SS_READ;
    if (adjtimex(&tx) >= 0 && tx.offset != 0)
        k->offset = tx.offset; /* adjtime(3) slew in progress (500 ppm) */
    return 0;
}

static void *calibrator_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "fastclock-cal");
    int tfd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);
    if (tfd >= 0)
        arm_clock_set_timer(tfd);
    struct kernel_rate_state kstate;
    int have_kstate = read_kernel_rate(&kstate) == 0;
    int64_t last_cal = 0, last_tick = 0, last_adj = 0;

    while (!atomic_load_explicit(&thread_stop, memory_order_acquire)) {
        int mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
        int64_t timeout_ns = -1;
        int64_t now = 0;
        if (mode == FC_MODE_TSC) {
            now = fastclock_mono_ns();
            int64_t interval = atomic_load_explicit(&stats.interval_ns, memory_order_relaxed);
            int64_t next = last_cal + interval;
            if (atomic_load_explicit(&coarse_wanted, memory_order_relaxed) && last_tick + 1000000 < next)
                next = last_tick + 1000000;
            if (have_kstate && last_adj + 50000000 < next)
                next = last_adj + 50000000;
            timeout_ns = next - now;
            if (timeout_ns < 0)
                timeout_ns = 0;
        } else if (mode == FC_MODE_SYSTEM) {
            fc_coarse_deactivate();
        }
        struct pollfd pfd[2] = {{.fd = wake_fd, .events = POLLIN}, {.fd = tfd, .events = POLLIN}};
        struct timespec to = {.tv_sec = timeout_ns / FC_NS_PER_SEC, .tv_nsec = timeout_ns % FC_NS_PER_SEC};
        int pr = ppoll(pfd, tfd >= 0 ? 2 : 1, timeout_ns >= 0 ? &to : 0, 0);
        int force = 0;
        if (pr > 0 && (pfd[0].revents & POLLIN)) {
            uint64_t v;
            ssize_t rr = read(wake_fd, &v, sizeof v);
            (void)rr;
        }
        if (pr > 0 && tfd >= 0 && (pfd[1].revents & POLLIN)) {
            uint64_t v;
            if (read(tfd, &v, sizeof v) < 0 && errno == ECANCELED)
                force = 1; /* CLOCK_REALTIME was set: follow it now */
            arm_clock_set_timer(tfd);
        }
        if (atomic_load_explicit(&fc_mode, memory_order_acquire) != FC_MODE_TSC)
            continue;
        now = fastclock_mono_ns();
        if (have_kstate && now - last_adj >= 50000000) {
            struct kernel_rate_state k;
            last_adj = now;
            if (read_kernel_rate(&k) == 0) {
                if (k.freq != kstate.freq || k.tick != kstate.tick || k.offset != 0 ||
                    ((k.status ^ kstate.status) & (STA_PLL | STA_FLL | STA_INS | STA_DEL | STA_UNSYNC))) {
                    /* NTP is steering the kernel: calibrate now and keep intervals short. */
                    force = 1;
                    atomic_store_explicit(&kernel_slewing_until, now + 5LL * FC_NS_PER_SEC,
                                          memory_order_relaxed);
                }
                kstate = k;
            }
        }
        int64_t interval = atomic_load_explicit(&stats.interval_ns, memory_order_relaxed);
        if (force || now - last_cal >= interval) {
            if (fc_cal_trylock()) {
                if (atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_TSC)
                    fc_cal_recalibrate();
                fc_cal_unlock();
            }
            last_cal = fastclock_mono_ns();
        }
        if (atomic_load_explicit(&coarse_wanted, memory_order_relaxed) &&
            atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_TSC) {
            coarse_update();
            last_tick = now;
        }
    }
    if (tfd >= 0)
        close(tfd);
    return 0;
}

void fc_calibrator_start(void)
{
    if (fc_calibrator_running())
        return;
    if (wake_fd < 0)
        wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd < 0)
        return;
    /* The thread must never run a signal handler: block everything it inherits. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    atomic_store_explicit(&thread_stop, 0, memory_order_relaxed);
    atomic_store_explicit(&thread_running, 1, memory_order_relaxed);
    if (pthread_create(&cal_thread, &attr, calibrator_main, 0) != 0)
        atomic_store_explicit(&thread_running, 0, memory_order_relaxed);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, 0);
}

void fc_calibrator_after_fork_child(void)
{
    /* The thread does not exist in the child: readers calibrate from now on. */
    atomic_store_explicit(&thread_running, 0, memory_order_relaxed);
    atomic_store_explicit(&cal_lock, 0, memory_order_relaxed);
    if (atomic_load_explicit(&fc_coarse.mono, memory_order_relaxed) != 0)
        fc_coarse_deactivate();
}

void fc_calibrator_stop(void)
{
    if (!fc_calibrator_running())
        return;
    atomic_store_explicit(&thread_stop, 1, memory_order_release);
    fc_calibrator_wake();
    pthread_join(cal_thread, 0);
    atomic_store_explicit(&thread_running, 0, memory_order_relaxed);
    fc_coarse_deactivate();
}

void fc_cal_reset_for_tests(void)
{
    memset(&cal, 0, sizeof cal);
    atomic_store(&stats.calibrations, 0);
    atomic_store(&stats.last_err_ns, 0);
    atomic_store(&stats.max_err_ns, 0);
    atomic_store(&stats.realtime_steps, 0);
    atomic_store(&stats.rate_resets, 0);
    atomic_store(&stats.interval_ns, 0);
    atomic_store(&ticks_mult, 0);
    atomic_store(&coarse_wanted, 0);
    atomic_store(&cal_lock, 0);
    atomic_store(&kernel_slewing_until, 0);
}
