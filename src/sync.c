/*
 * The kernel's synchronisation state.
 *
 * Why it matters here: fastclock tracks the kernel's CLOCK_MONOTONIC, whose
 * rate adjtimex may change at any moment (a time daemon, or root by hand).
 * Between two calibrations a line can drift from the kernel by (rate
 * change) x (age).  A poll of adjtimex shows a change that stands, but not
 * one made and undone since the last poll; only a look at the kernel shows
 * that.  So every line's bound charges, from the last look that found the
 * line within its bound of the kernel (its publication, or a reader's
 * poll: fc_meta.checked_mono_ns), for the largest rate change adjtimex
 * permits whether or not anything steers the kernel (fc_sync_exposure_ns):
 *   - the frequency, within +-500 ppm: up to 1000 ppm between two
 *     settings, charged at 1500 ppm (half again; an adjtime(3) slew of 500
 *     ppm on top of the widest frequency change uses that half up, and the
 *     tick's margin below covers it);
 *   - the tick, within +-10% of 10000 us (USER_HZ 100): from the tick the
 *     line was built for to the far end of that range, as a fraction of the
 *     slower rate (an age counted on either clock): 1/9 at the nominal
 *     tick, 2/9 where the line's tick is not known; and half again, as
 *     margin (a tick change shows in CLOCK_MONOTONIC at once, measured on
 *     Linux 6.18; see fc_sync_unseen_rate).
 * So the bound is about 0.17 x the time since the line's last look: the
 * poll interval sets it (readers: every 1 ms of reading, calibration.c
 * fc_track_poll, which looks at the line, then polls adjtimex; the thread:
 * the global line every 10 ms, calibrator.c).  A look that finds the line
 * off beyond the bound it would leave recalibrates instead.  The bound of
 * one line never counts from a poll that did not look at it: another CPU's
 * line, a status call, the thread's poll in tsc-percpu.  (Not covered: an
 * ntpd-style PLL offset, ADJ_OFFSET with STA_PLL, slews at up to offset/4
 * per second; its effect
 * starts at the next second boundary and shows as offset != 0 at the next
 * poll, which then counts as steering.)
 *
 * While something steers the kernel (synchronised, a recent change, an
 * offset being slewed), lines also grow their bound at the steering rate
 * (fc_sync_rate_allowance) and calibrations come every 10 ms.
 *
 * For REALTIME, the kernel's own maxerror is added: that is how far the
 * kernel itself may be from true UTC.  The kernel grows it by 500 us at
 * once as REALTIME passes each whole second (second_overflow, at the first
 * timekeeping update after it), so between polls it is aged in those
 * steps, every boundary that may have passed since the poll counted whole
 * (fc_sync_get).
 */
#define _GNU_SOURCE
#include "sync.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/timex.h>

#include "internal.h"
#include "kernel.h"

#define STEERING_HOLD_NS (5LL * FC_NS_PER_SEC)
#define MAXFREQ_PPM 500.0
#define NOMINAL_TICK_US 10000L            /* USER_HZ 100 */
#define MIN_TICK_US 9000L                 /* adjtimex accepts tick within +-10% of nominal */
#define MAX_TICK_US 11000L
#define RECENT_CHANGE_NS (5LL * FC_NS_PER_SEC)
#define NTP_PHASE_LIMIT_NS (16LL * FC_NS_PER_SEC) /* the kernel's cap on maxerror */
#define MAXERROR_STEP_NS 500000LL                 /* what each second adds to it (MAXFREQ) */
/* How late after a second the kernel may add that step: a tick at HZ 100
 * (the CPU that polls is busy, so its tick runs), and as much again. */
#define MAXERROR_STEP_LATE_NS 20000000LL

static struct {
    _Atomic int known;
    _Atomic int synchronized;
    _Atomic int leap;
    _Atomic int64_t maxerror_us, esterror_us, tai;
    _Atomic long freq, tick, offset;
    _Atomic long ss_offset;            /* adjtime(3)'s slew still to run (0: none) */
    _Atomic int status;
    _Atomic int64_t sampled_mono;
    _Atomic uint64_t answered_by; /* the serial (my_serial) of the thread whose poll was answered last */
    _Atomic int64_t sampled_phase_ns; /* REALTIME's place in its second at the poll (tx.time) */
    _Atomic int64_t steering_until;
    /* Changes of the kernel's rate settings, counted, so that no poll can
     * swallow one another reader needs to see (calibration restarts its
     * history on any new generation). */
    _Atomic uint64_t generation;
    /* One poll at a time (a try-lock; others skip): the poller's serial
     * (my_serial; 0: none), so that a fork child and a handler nested in a
     * poll can tell whose it is. */
    _Atomic uint64_t polling;
    /* Set by a poll that found a change, from its last_change to its
     * generation: a fork child whose poller is gone counts that change. */
    _Atomic int change_uncounted;
    _Atomic double last_change;        /* size of the last change, as a rate fraction */
    _Atomic int64_t last_change_mono;
    /* The largest change of the recent window and when it was seen: a
     * change of status alone (size 0), or a small one, after a large one
     * must not hide it while the kernel still phases it in. */
    _Atomic double largest_change;
    _Atomic int64_t largest_change_mono;
    /* The kernel's REALTIME - MONOTONIC, taken just before the poll's
     * adjtimex (INT64_MIN: not taken): see fc_sync_wall_offset.  One word,
     * stored last with release, so that its value and the state it came
     * with are one poll's. */
    _Atomic int64_t wall_offset_ns;
    /* A child's answer under a filter, for threads under as many
     * (fc_kernel_adjtimex_kills). */
    struct fc_adjtimex_memo adjtimex_memo;
} sync_state;

static int sync_poll_locked(int64_t now);

/* Whether adjtimex may be called on this thread (fc_kernel_adjtimex_kills):
 * 0 not asked yet, 1 yes, -1 a seccomp filter would kill it -- then every
 * poll here is a refusal that never reaches the kernel.  A thread's own: a
 * seccomp filter belongs to the thread that installed it and the threads it
 * made after (the calibrator thread, made in the constructor, has none of
 * the filter main installs later), unless installed with TSYNC, on every
 * thread.  Asked by this thread's first poll; asked again where a filter
 * came since (adjtimex_seen: the filters the answer holds for), before
 * any poll of a thread that was answered yes; and in a fork child, which
 * may have installed a filter of its own.  (A "no" is final: filters are
 * never removed.) */
static __thread signed char adjtimex_verdict __attribute__((tls_model("initial-exec")));
static __thread struct fc_seccomp_seen adjtimex_seen __attribute__((tls_model("initial-exec")));

struct fc_adjtimex_verdict fc_sync_adjtimex_verdict(void)
{
    struct fc_adjtimex_verdict v = {adjtimex_verdict, adjtimex_seen};
    return v;
}

void fc_sync_inherit_adjtimex_verdict(struct fc_adjtimex_verdict v)
{
    adjtimex_verdict = (signed char)v.verdict;
    adjtimex_seen = v.seen;
}

/* With the poll token held, once per poll: may this poll call adjtimex? */
static int adjtimex_allowed(void)
{
    if (fc_seam.adjtimex)
        return 1;
    if (adjtimex_verdict > 0 && fc_kernel_seccomp_grew(&adjtimex_seen))
        adjtimex_verdict = 0;
    if (adjtimex_verdict == 0)
        adjtimex_verdict = fc_kernel_adjtimex_kills(&sync_state.adjtimex_memo, &adjtimex_seen) ? -1 : 1;
    return adjtimex_verdict > 0;
}

/* This thread's last refused poll (sync_poll_locked): its polls pace by it. */
static __thread int64_t own_refusal_mono __attribute__((tls_model("initial-exec")));
/* The last refusal that counted (every thread refused: ProtectClock, a
 * TSYNC filter), any thread's: refused threads pace by it too, as one. */
static _Atomic int64_t counted_refusal_mono;
/* How fresh another thread's answer must be for a refusal that is this
 * thread's own (its filter) to leave the process's state alone. */
#define OWN_REFUSAL_GRACE_NS FC_NS_PER_SEC

/* A number of this thread's own, never another's (a thread's address may
 * be a dead thread's: glibc reuses stacks), kept by a fork child's thread;
 * 0 until first asked.  Taken with a compare-and-swap: a handler that
 * interrupts the first ask takes it first, and the ask then keeps that. */
static _Atomic uint64_t serials;
static __thread _Atomic uint64_t serial __attribute__((tls_model("initial-exec")));
static uint64_t my_serial(void)
{
    uint64_t s = atomic_load_explicit(&serial, memory_order_relaxed);
    if (s == 0) {
        uint64_t mine = atomic_fetch_add_explicit(&serials, 1, memory_order_relaxed) + 1;
        if (atomic_compare_exchange_strong_explicit(&serial, &s, mine, memory_order_relaxed, memory_order_relaxed))
            s = mine;
    }
    return s;
}

/* Another thread's poll was answered less than OWN_REFUSAL_GRACE_NS ago (a
 * refusal after this thread's own answer is a change for this thread: a
 * filter it installed since, one on every thread). */
static int answered_lately(int64_t now)
{
    return atomic_load_explicit(&sync_state.known, memory_order_acquire) &&
           atomic_load_explicit(&sync_state.answered_by, memory_order_relaxed) != my_serial() &&
           now - atomic_load_explicit(&sync_state.sampled_mono, memory_order_acquire) < OWN_REFUSAL_GRACE_NS;
}

/* With the poll token held, where adjtimex_allowed() said yes. */
static int kernel_adjtimex(struct timex *tx)
{
    if (fc_seam.adjtimex)
        return fc_seam.adjtimex(tx);
    return adjtimex(tx);
}

/*
 * One poller at a time: two interleaved polls would each compare with the
 * other's result (one sees the old settings, the other the new) and count
 * changes back and forth, with sampled_mono going back.  A poll that finds
 * another running skips: that one's result is as fresh as its own would be.
 */
int fc_sync_poll(int64_t now)
{
    /* Looked at before the try: a waiting caller must not take the line
     * away from the poller it waits for. */
    uint64_t owner = atomic_load_explicit(&sync_state.polling, memory_order_relaxed);
    if (owner == 0) /* a failed try leaves the owner in `owner` */
        atomic_compare_exchange_strong_explicit(&sync_state.polling, &owner, my_serial(), memory_order_acquire,
                                                memory_order_relaxed);
    if (owner != 0)
        return owner == my_serial() ? FC_SYNC_POLL_MINE : FC_SYNC_POLL_BUSY;
    int saved = errno; /* a refused adjtimex must not show through a successful read */
    int changed = sync_poll_locked(now);
    errno = saved;
    atomic_store_explicit(&sync_state.polling, 0, memory_order_release);
    return changed;
}

static int sync_poll_locked(int64_t now)
{
    struct timex tx;
    memset(&tx, 0, sizeof tx);
    /* Refused while another thread is answered (a filter of this thread's
     * own, that kills or refuses: a seccomp filter is a thread's): the
     * process's state is that answer, which a refusal here says nothing
     * about.  Marking it unknown (and pacing every poll by this one)
     * flipped it back and forth, and a filtered thread reading at every
     * millisecond kept the calibrator's polls from running.  Only where no
     * answer is fresh (every thread refused: TSYNC, ProtectClock) does a
     * refusal count. */
    int allowed = adjtimex_allowed();
    if (!allowed && answered_lately(now)) {
        own_refusal_mono = now;
        return 0;
    }
    /* REALTIME - MONOTONIC, before adjtimex: only a step moves it
     * (settimeofday, ADJ_SETOFFSET, a leap second; slewing moves both
     * clocks alike), and a step resets the kernel's maxerror to 16 s and
     * sets STA_UNSYNC at once.  Taken first, a step between the two shows
     * later as a moved offset (a needless poll), never as a stale state
     * that looks current.  MONOTONIC on both sides: the gap halved is its
     * error. */
    int64_t m1 = fc_kernel_ns(CLOCK_MONOTONIC), wall = fc_kernel_ns(CLOCK_REALTIME);
    int64_t m2 = fc_kernel_ns(CLOCK_MONOTONIC);
    int64_t wall_offset = m1 != 0 && wall != 0 && m2 >= m1 ? wall - m1 - (m2 - m1) / 2 : INT64_MIN;
    int state = allowed ? kernel_adjtimex(&tx) : -1;
    if (state < 0 && answered_lately(now)) {
        own_refusal_mono = now; /* refused by a filter that returns an error: as above */
        return 0;
    }
    if (state < 0) {
        own_refusal_mono = now; /* this thread's next poll paces by it */
        atomic_store_explicit(&counted_refusal_mono, now, memory_order_relaxed);
        /* Refused (nothing seen): whether
         * a daemon disciplines the kernel is unknown now (-1; counted as
         * steering, the cautious side).  maxerror ages on from the last
         * answer. */
        atomic_store_explicit(&sync_state.synchronized, -1, memory_order_relaxed);
        return 0;
    }
    long offset = (tx.status & STA_PLL) ? tx.offset : 0;
    struct timex ss;
    memset(&ss, 0, sizeof ss);
    ss.modes = ADJ_OFFSET_SS_READ;
    long ss_offset = kernel_adjtimex(&ss) >= 0 ? ss.offset : 0;
    if (ss_offset != 0)
        offset = ss_offset; /* an adjtime(3) slew is running (500 ppm) */

    int changed = 0;
    if (atomic_load_explicit(&sync_state.known, memory_order_relaxed)) {
        long old_freq = atomic_load_explicit(&sync_state.freq, memory_order_relaxed);
        long old_tick = atomic_load_explicit(&sync_state.tick, memory_order_relaxed);
        /* An adjtime(3) slew starting or ending moves the rate by 500 ppm
         * at once (openntpd, or adjtime by hand): a change like the others. */
        long old_ss = atomic_load_explicit(&sync_state.ss_offset, memory_order_relaxed);
        int slew_changed = (ss_offset != 0) != (old_ss != 0);
        changed = tx.freq != old_freq || tx.tick != old_tick || slew_changed ||
                  ((tx.status ^ atomic_load_explicit(&sync_state.status, memory_order_relaxed)) &
                   (STA_PLL | STA_FLL | STA_UNSYNC | STA_FREQHOLD));
        if (changed) {
            double d = (double)(tx.freq - old_freq) / 65536e6 + (double)(tx.tick - old_tick) / NOMINAL_TICK_US;
            if (slew_changed)
                d = (d < 0 ? -d : d) + MAXFREQ_PPM * 1e-6;
            d = d < 0 ? -d : d;
            if (d >= atomic_load_explicit(&sync_state.largest_change, memory_order_relaxed) ||
                now - atomic_load_explicit(&sync_state.largest_change_mono, memory_order_relaxed) > RECENT_CHANGE_NS) {
                atomic_store_explicit(&sync_state.largest_change, d, memory_order_relaxed);
                atomic_store_explicit(&sync_state.largest_change_mono, now, memory_order_relaxed);
            }
            atomic_store_explicit(&sync_state.last_change, d, memory_order_relaxed);
            atomic_store_explicit(&sync_state.last_change_mono, now, memory_order_relaxed);
            atomic_store_explicit(&sync_state.change_uncounted, 1, memory_order_relaxed);
            atomic_thread_fence(memory_order_release); /* the flag before the settings: a fork child */
        }
    }
    if (changed || offset != 0)
        atomic_store_explicit(&sync_state.steering_until, now + STEERING_HOLD_NS, memory_order_relaxed);

    int synced = !(tx.status & STA_UNSYNC) && state != TIME_ERROR;
    atomic_store_explicit(&sync_state.synchronized, synced, memory_order_relaxed);
    atomic_store_explicit(&sync_state.leap,
                          (tx.status & STA_INS) ? 1 : (tx.status & STA_DEL) ? -1 : 0, memory_order_relaxed);
    atomic_store_explicit(&sync_state.maxerror_us, tx.maxerror, memory_order_relaxed);
    /* After maxerror, with release: a reader that sees this phase sees this
     * maxerror or a later one (fc_sync_get). */
    int64_t phase = (tx.status & STA_NANO) ? (int64_t)tx.time.tv_usec : (int64_t)tx.time.tv_usec * 1000;
    atomic_store_explicit(&sync_state.sampled_phase_ns, phase >= 0 && phase < FC_NS_PER_SEC ? phase : 0,
                          memory_order_release);
    atomic_store_explicit(&sync_state.esterror_us, tx.esterror, memory_order_relaxed);
    atomic_store_explicit(&sync_state.tai, tx.tai, memory_order_relaxed);
    atomic_store_explicit(&sync_state.freq, tx.freq, memory_order_relaxed);
    atomic_store_explicit(&sync_state.tick, tx.tick, memory_order_relaxed);
    atomic_store_explicit(&sync_state.offset, offset, memory_order_relaxed);
    atomic_store_explicit(&sync_state.ss_offset, ss_offset, memory_order_relaxed);
    atomic_store_explicit(&sync_state.status, tx.status, memory_order_relaxed);
    /* The settings before the generation: whoever sees the new generation
     * also sees the settings that made it (calibration rescales its rate by
     * them). */
    if (changed && fc_seam.writer_step)
        fc_seam.writer_step("poll-stored");
    if (changed) {
        atomic_fetch_add_explicit(&sync_state.generation, 1, memory_order_seq_cst);
        atomic_store_explicit(&sync_state.change_uncounted, 0, memory_order_relaxed);
    }
    /* Stored after the state it goes with, released (fc_sync_wall_offset). */
    atomic_store_explicit(&sync_state.wall_offset_ns, wall_offset, memory_order_release);
    atomic_store_explicit(&sync_state.answered_by, my_serial(), memory_order_relaxed);
    atomic_store_explicit(&sync_state.sampled_mono, now, memory_order_release);
    atomic_store_explicit(&sync_state.known, 1, memory_order_release);
    return changed;
}

static int steering_now(void)
{
    if (!atomic_load_explicit(&sync_state.known, memory_order_acquire))
        return 0;
    int64_t sampled = atomic_load_explicit(&sync_state.sampled_mono, memory_order_relaxed);
    return atomic_load_explicit(&sync_state.synchronized, memory_order_relaxed) != 0 ||
           atomic_load_explicit(&sync_state.offset, memory_order_relaxed) != 0 ||
           atomic_load_explicit(&sync_state.steering_until, memory_order_relaxed) > sampled;
}

double fc_sync_rate_allowance(void)
{
    if (!steering_now())
        return 0.0;
    long tick = atomic_load_explicit(&sync_state.tick, memory_order_relaxed);
    double tick_dev = tick > 0 ? (double)(tick > 10000 ? tick - 10000 : 10000 - tick) / 10000.0 : 0.0;
    return 2.0 * MAXFREQ_PPM * 1e-6 + tick_dev;
}

void fc_sync_get(int64_t now, struct fc_sync_snapshot *out)
{
    memset(out, 0, sizeof *out);
    if (!atomic_load_explicit(&sync_state.known, memory_order_acquire))
        return;
    out->known = 1;
    out->synchronized = atomic_load_explicit(&sync_state.synchronized, memory_order_relaxed);
    out->steering = steering_now();
    out->leap_pending = atomic_load_explicit(&sync_state.leap, memory_order_relaxed);
    /* sampled_mono before maxerror, with acquire: the poll stores it last
     * (release), so the maxerror read below is from that poll or a later one
     * -- never an older maxerror aged from a newer sample, which would grow
     * it too little.  A later poll's maxerror is only aged more: larger. */
    out->age_ns = now - atomic_load_explicit(&sync_state.sampled_mono, memory_order_acquire);
    if (out->age_ns < 0)
        out->age_ns = 0;
    /* The kernel adds 500 us to maxerror as REALTIME passes each second, a
     * little after it, up to NTP_PHASE_LIMIT (16 s).  Counted here: every
     * second boundary in (poll - late, now], the poll's place in its second
     * from tx.time (REALTIME's seconds pass at MONOTONIC's rate).  A poll
     * just before a boundary and a read just after it see the whole step;
     * aged smoothly, the bound came out 500 us short.  The phase after
     * sampled_mono, with acquire (a poll no older, so the age is no
     * shorter), maxerror after it (no older again: its boundaries are a
     * subset of those counted). */
    int64_t phase = atomic_load_explicit(&sync_state.sampled_phase_ns, memory_order_acquire);
    int64_t steps = (phase + out->age_ns) / FC_NS_PER_SEC + (phase < MAXERROR_STEP_LATE_NS ? 1 : 0);
    int64_t maxerror = atomic_load_explicit(&sync_state.maxerror_us, memory_order_relaxed) * 1000;
    out->maxerror_ns = steps >= NTP_PHASE_LIMIT_NS / MAXERROR_STEP_NS ? NTP_PHASE_LIMIT_NS
                                                                      : maxerror + steps * MAXERROR_STEP_NS;
    if (out->maxerror_ns > NTP_PHASE_LIMIT_NS)
        out->maxerror_ns = NTP_PHASE_LIMIT_NS;
    out->esterror_ns = atomic_load_explicit(&sync_state.esterror_us, memory_order_relaxed) * 1000;
    out->tai_offset_s = atomic_load_explicit(&sync_state.tai, memory_order_relaxed);
    out->freq_scaled = atomic_load_explicit(&sync_state.freq, memory_order_relaxed);
    out->tick_us = atomic_load_explicit(&sync_state.tick, memory_order_relaxed);
}

uint64_t fc_sync_generation(void)
{
    return atomic_load_explicit(&sync_state.generation, memory_order_acquire);
}

int fc_sync_settings(long *freq, long *tick)
{
    /* Not while polls are refused (synchronized -1: a seccomp filter or
     * ProtectClock since the last answer): that answer's tick may no longer
     * hold, and a rate measured now is under settings nobody saw. */
    if (!atomic_load_explicit(&sync_state.known, memory_order_acquire) ||
        atomic_load_explicit(&sync_state.synchronized, memory_order_relaxed) < 0)
        return 0;
    *freq = atomic_load_explicit(&sync_state.freq, memory_order_relaxed);
    *tick = atomic_load_explicit(&sync_state.tick, memory_order_relaxed);
    return 1;
}

double fc_sync_last_change(void)
{
    return atomic_load_explicit(&sync_state.last_change, memory_order_relaxed);
}

/* The kernel applies a new tick or frequency over the following ticks, so a
 * rate jump of the size of a change seen in the last few seconds is the
 * kernel's doing, not the counter's. */
double fc_sync_recent_change(int64_t now)
{
    double recent = 0.0;
    if (now - atomic_load_explicit(&sync_state.last_change_mono, memory_order_relaxed) <= RECENT_CHANGE_NS)
        recent = atomic_load_explicit(&sync_state.last_change, memory_order_relaxed);
    if (now - atomic_load_explicit(&sync_state.largest_change_mono, memory_order_relaxed) <= RECENT_CHANGE_NS) {
        double largest = atomic_load_explicit(&sync_state.largest_change, memory_order_relaxed);
        if (largest > recent)
            recent = largest;
    }
    return recent;
}

/*
 * The error a line may have picked up from kernel rate changes since it
 * was last found within its bound of the kernel: adjtimex may have changed
 * the frequency and the tick at any moment since, by as much as it permits
 * (see the top of this file), whether or not a daemon runs.  A poll does
 * not end this: it sees the settings now, not a change made and undone
 * since the last one, which only a look at the kernel shows.
 */
int64_t fc_sync_exposure_ns(int64_t checked_mono, long tick_us, int64_t now)
{
    int64_t exposed = now - checked_mono;
    if (exposed <= 0)
        return 0;
    return (int64_t)((double)exposed * fc_sync_unseen_rate(tick_us)) + 1;
}

/* The largest rate change adjtimex could make now, as a fraction. */
double fc_sync_unseen_rate(long tick)
{
    /* 1000 ppm between two frequency settings, and half again as margin
     * (1.26x was measured once on Linux 6.18 in a KVM guest, before the
     * slope across an unseen change was found to be ours: see below). */
    double a = 3.0 * MAXFREQ_PPM * 1e-6;
    /* The tick, from the line's to the far end of what adjtimex accepts
     * (the line's, not the one last seen: a line built at 9000 after which
     * 10000 was seen, then 11000 unseen, runs 2/9 off).  Not known (adjtimex
     * refused, or never answered): from either end to the other. */
    long up, down;
    if (tick < MIN_TICK_US || tick > MAX_TICK_US) {
        tick = MIN_TICK_US;
        up = down = MAX_TICK_US - MIN_TICK_US;
    } else {
        up = MAX_TICK_US - tick;
        down = tick - MIN_TICK_US;
    }
    /* As a fraction of the slower of the two rates: an age may be counted
     * on the line (the old rate) or on the kernel's clock (where it answers
     * ordered reads, as in tsc-percpu), and a drop from 10000 to 9000 puts
     * the line ahead by 1/9 of every kernel ns (1/10 of every line ns). */
    double rise = (double)up / (double)tick, drop = (double)down / (double)MIN_TICK_US;
    /* And half again, kept as margin.  (It was once measured as the
     * kernel's catch-up: lazy tsc-percpu, 10000 -> 9000 after 11000 -> 10000
     * unseen half a second before, the line drew ahead at 14.6% of every
     * kernel ns, 1.31x the 1/9.  That was our own rate, the slope across the
     * unseen change; calibration.c now keeps the rate there (update_rate),
     * and the kernel runs at the new rate from the microsecond after
     * adjtimex returns, measured on Linux 6.18.) */
    return a + 1.5 * (rise > drop ? rise : drop);
}

int fc_sync_wall_offset(int64_t *offset_ns)
{
    /* Acquire, and before the caller's fc_sync_get: the poll stores the
     * offset after the state it read (release), so a state read after
     * this is that poll's or a later one's -- never an older state with
     * this newer offset, which would hide a step. */
    *offset_ns = atomic_load_explicit(&sync_state.wall_offset_ns, memory_order_acquire);
    return *offset_ns != INT64_MIN && *offset_ns != 0;
}

/* The last answered poll, any thread's, or this thread's own last refused
 * one, the later (0: none yet): polls pace themselves by it.  A thread
 * that is answered never paces by another thread's refusal (one under a
 * filter of its own, polling at every millisecond of its reading, would
 * hold back the calibrator thread's polls); a refused thread also paces by
 * the last refusal that counted, so that threads all refused poll about
 * once a ms together. */
int64_t fc_sync_last_poll(void)
{
    int64_t last = atomic_load_explicit(&sync_state.sampled_mono, memory_order_acquire);
    if (own_refusal_mono != 0) { /* a refused thread */
        int64_t counted = atomic_load_explicit(&counted_refusal_mono, memory_order_relaxed);
        if (own_refusal_mono > last)
            last = own_refusal_mono;
        if (counted > last)
            last = counted;
    }
    return last;
}

void fc_sync_after_fork_child(void)
{
    /* A poll in another thread at the fork never finishes in the child; one
     * on this thread (fork from a handler that interrupted it) goes on.  The
     * one that never finishes may have found a change and stored its
     * settings without counting it, and the child's next poll would find
     * nothing changed: count it.  (One cut short before it found the change
     * left the old settings, and the child's own poll finds it.) */
    /* The child may install a seccomp filter of its own before it polls. */
    adjtimex_verdict = 0; /* the child's one thread: the one that forked */
    own_refusal_mono = 0;
    __atomic_store_n(&sync_state.adjtimex_memo.word, 0, __ATOMIC_RELAXED);
    uint64_t owner = atomic_load_explicit(&sync_state.polling, memory_order_relaxed);
    if (owner == 0 || owner == my_serial())
        return;
    if (atomic_exchange_explicit(&sync_state.change_uncounted, 0, memory_order_relaxed))
        atomic_fetch_add_explicit(&sync_state.generation, 1, memory_order_relaxed);
    atomic_store_explicit(&sync_state.polling, 0, memory_order_relaxed);
}

void fc_sync_forget(void)
{
    /* a poll this thread is in (fork from a handler) goes on */
    if (atomic_load_explicit(&sync_state.polling, memory_order_relaxed) != my_serial())
        memset(&sync_state, 0, sizeof sync_state);
    own_refusal_mono = 0; /* another timeline's time: it would pace this thread's polls */
    atomic_store_explicit(&counted_refusal_mono, 0, memory_order_relaxed);
}

void fc_sync_reset_for_tests(void)
{
    memset(&sync_state, 0, sizeof sync_state);
    own_refusal_mono = 0;
    atomic_store(&counted_refusal_mono, 0);
}
