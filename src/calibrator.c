/*
 * The background calibrator thread.
 *
 * It keeps lines fresh so that readers never calibrate, and it reacts to
 * what readers cannot see cheaply:
 *   - a REALTIME step wakes it (timerfd with TFD_TIMER_CANCEL_ON_SET, which
 *     also fires on resume from suspend) to refresh the line's offsets and
 *     the coarse clocks; fine wall reads do not wait for it (wall.h checks
 *     the kernel's offset on every read);
 *   - every 10 ms (4 ms while steered) it looks at the global line against
 *     the kernel and polls adjtimex, which shows the kernel's rate changing;
 *     the error bound charges ~17% of the time since the line's last look
 *     (the largest change adjtimex permits, unseen);
 *   - it decides the mode a millisecond after the process first reads the time;
 *   - a cross-CPU warp check at start-up (a few ms; again 1 s later, then
 *     2, 4, ... up to 320 s, with longer windows, until it has compared a
 *     pair) decides whether the global line is good
 *     enough or each CPU needs its own (tsc-percpu);
 *   - in tsc-percpu mode it has every CPU calibrated there, by a short-lived
 *     thread pinned to each in turn (the tour), ticking while it waits;
 *   - it feeds the coarse clocks every millisecond once someone uses them.
 * It runs with every signal blocked and only reads the clock through the
 * public functions, so it never holds anything a reader could wait on.
 *
 * File descriptors.  Programs close descriptors they did not open (daemons
 * close everything) and reuse the numbers, so nothing outside this thread
 * touches a descriptor of ours: wake-ups go through a futex, and the thread
 * reads its timerfd only after timerfd_gettime shows it is still its own
 * (armed, with an interval nobody else would choose); otherwise it leaves
 * the number alone, and goes on without a timerfd.  One is made only once,
 * before the thread starts (in the library's constructor, before main), and
 * above the standard streams: one made later, beside the program, could
 * take the number it is about to open by the lowest-free rule (a daemon
 * reopening stdin after closing everything).  Without one, a REALTIME step
 * reaches the thread at its next wake-up (10 ms at most); reads never wait
 * for it.
 *
 * While it waits on the timerfd, the futex's wake-ups wait for that
 * wake-up too: a first coarse read's request for ticks (served meanwhile
 * from the fine clock, upkeep.c), a mode change.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "calibrator.h"

#include "calibration.h"
#include "clock.h"
#include "fmt.h"
#include "kernel.h"
#include "mode.h"
#include "percpu.h"
#include "sync.h"
#include "upkeep.h"
#include "warp.h"

/* adjtimex while the counter answers: the error bound covers what a rate
 * change could do since the line's last look at the kernel -- the largest
 * adjtimex permits, 1/9 through the tick (and half again, as margin) plus
 * 1500 ppm through the frequency, x that time (sync.c).  Readers look (and
 * poll) once per millisecond of reading (~3.5 us each, calibration.c
 * fc_track_poll), which keeps the bound near 0.1 ms while the clock is read;
 * these looks cover a process that is not reading.  Each wake-up costs 60-70
 * us of CPU in a KVM guest (2 vCPUs, measured): every 10 ms is 0.57% of a
 * CPU; while a daemon steers the kernel, every 4 ms (1.2%). */
#define ADJTIMEX_POLL_NS 10000000LL
#define ADJTIMEX_STEERING_POLL_NS 4000000LL
#define IDLE_POLL_NS 50000000LL
/* The kernel's list of clocksources looked at again (a sysfs read, ~10 us):
 * its watchdog marks an unstable TSC within about a second. */
#define TRUST_CHECK_NS (2LL * FC_NS_PER_SEC)
#define DECIDE_AFTER_NS 1000000LL
#define COARSE_TICK_NS 1000000LL
#define WARP_NS_PER_PAIR 1000000LL  /* start-up check: ~1 ms per CPU pair ... */
#define WARP_MAX_PAIRS 4            /* ... at most 4 pairs */
/* A check that compared no pair (one CPU allowed, for now; every pair's
 * CPUs busy: on a loaded 2-vCPU VM the two workers may not run at once
 * within 1 ms), or that found no warp but skipped a pair, is tried again
 * 1 s later, twice as late each time up to WARP_RETRY_MAX_NS, each pair's
 * window 4x as long up to 16 ms, until every pair has been compared or a
 * warp found -- and no more once workers were left behind on CPUs they
 * never got WARP_MAX_STUCK times (a real-time task holds one): each such
 * try leaves one more thread behind. */
#define WARP_RETRY_NS (1LL * FC_NS_PER_SEC)
#define WARP_RETRY_MAX_NS (320LL * FC_NS_PER_SEC)
#define WARP_MAX_WINDOW_NS 16000000LL
#define WARP_RATE_SAMPLE_TRIES 8 /* brackets per sample for the check's own rate, as percpu.c's seed */
#define WARP_MAX_STUCK 3

static pthread_t cal_thread;
static _Atomic int thread_stop;

void fc_calibrator_pause(int paused)
{
    fc_upkeep_pause(paused);
}

static void coarse_update(void)
{
    int64_t mono = fastclock_mono_ns();
    fc_coarse_publish(mono, fastclock_real_ns());
}

void fc_calibrator_coarse_tick(void)
{
    coarse_update();
}

#define FAR_FUTURE_S ((time_t)1 << 40) /* our timer never fires; only cancellation matters */

/* The signature of our timer: an interval nobody else would choose (the
 * timer never expires, so it is never used).  The expiry itself cannot
 * identify it: the kernel clamps 2^40 s to KTIME_MAX (year 2262), and what
 * timerfd_gettime reports as remaining shrinks with the time and with every
 * REALTIME step.  The interval is reported back unchanged; to be sure of
 * that on any kernel, the value read right after arming is the one compared. */
#define SIGNATURE_S 977461ll
#define SIGNATURE_NS 286331153l
static struct timespec armed_interval; /* as timerfd_gettime reported it after arming */

/* Arms tfd to wake on a REALTIME step; returns -1 if that fails, after
 * closing it if it is `fresh` (just made, so certainly ours): a descriptor
 * we cannot recognise is never kept, and one that may be the program's
 * by now is never closed. */
static int arm_clock_set_timer(int tfd, int fresh)
{
    struct itimerspec its, cur;
    memset(&its, 0, sizeof its);
    its.it_value.tv_sec = FAR_FUTURE_S;
    its.it_interval.tv_sec = (time_t)SIGNATURE_S;
    its.it_interval.tv_nsec = SIGNATURE_NS;
    /* ECANCELED: armed all the same (the kernel arms, then says so), but
     * REALTIME was set again since the wake-up the caller is handling (two
     * steps close together: a resume, then the daemon's step).  Its
     * recalibration follows the re-arm and sees both. */
    int r = timerfd_settime(tfd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &its, 0);
    if (r != 0 && errno == ECANCELED)
        r = 0;
    if (r != 0 || timerfd_gettime(tfd, &cur) != 0 || (cur.it_value.tv_sec == 0 && cur.it_value.tv_nsec == 0) ||
        (cur.it_interval.tv_sec == 0 && cur.it_interval.tv_nsec == 0)) {
        if (fresh)
            close(tfd);
        return -1;
    }
    armed_interval = cur.it_interval;
    return tfd;
}

/* Is tfd still our timer?  A closed number fails (EBADF); someone else's
 * file is not a timerfd (EINVAL); someone else's timerfd does not carry our
 * interval, or is not armed. */
static int still_our_timer(int tfd)
{
    struct itimerspec cur;
    return tfd >= 0 && timerfd_gettime(tfd, &cur) == 0 && cur.it_interval.tv_sec == armed_interval.tv_sec &&
           cur.it_interval.tv_nsec == armed_interval.tv_nsec &&
           (cur.it_value.tv_sec != 0 || cur.it_value.tv_nsec != 0);
}

/* Our timerfd, above the standard streams (a program started with one
 * closed would otherwise find ours there), or -1. */
static int new_clock_set_timer(void)
{
    int tfd = timerfd_create(CLOCK_REALTIME, TFD_CLOEXEC | TFD_NONBLOCK);
    if (tfd >= 0 && tfd <= STDERR_FILENO) {
        int high = fcntl(tfd, F_DUPFD_CLOEXEC, STDERR_FILENO + 1);
        close(tfd);
        tfd = high;
    }
    return tfd >= 0 ? arm_clock_set_timer(tfd, 1) : -1;
}

/* The coarse clocks' tick while the warp check waits on its workers (a
 * try takes 1-16 ms a pair, up to ~100 ms more on a busy machine): they
 * would stand still for all of it. */
static void warp_tick(void)
{
    if (fc_coarse_wanted())
        coarse_update();
}

/* A warp found but not yet acted on: the switch needs the writer's lock,
 * which a reader may hold for a moment (its adjtimex poll, the first line);
 * the thread tries again on each turn until the mode has left tsc. */
static char warp_why[256];
static int warp_pending;

/* Start-up check: are the CPUs' counters in step?  If not, each CPU gets its
 * own line (or, without rdtscp, the kernel's clocks).  0 where no pair could
 * be compared: no verdict yet (status shows max_warp_cycles -1); try is the
 * number of tries before this one. */
static int startup_warp_check(int try)
{
    static int stuck_tries;
    if (fc_seam.skip_warp_check || (fc_seam.counter && fc_seam.warp_cycles <= 0))
        return 1;
    struct fc_warp_result w;
    int in_step = 0; /* no warp, or one under a nanosecond (status shows its size) */
    if (fc_seam.warp_cycles > 0) { /* tests: the verdict, without the measurement */
        memset(&w, 0, sizeof w);
        w.max_warp_cycles = fc_seam.warp_cycles;
        w.worst_cpu_b = 1;
    } else {
        int64_t window = WARP_NS_PER_PAIR;
        for (int i = 0; i < try && window < WARP_MAX_WINDOW_NS; i++)
            window *= 4;
        /* The tolerance (under a nanosecond) needs the counter's rate: the
         * line's, or where the check runs before the first line (it starts
         * right after the decision), the rate across the check itself, from
         * a calibration sample at each end (1 ms and more apart: ample for
         * it), so that the verdict does not depend on which came first.
         * With neither, 1 cycle. */
        struct fc_sample s0, s1;
        int ends = fc_cal_sample(&s0, WARP_RATE_SAMPLE_TRIES, -1) == FC_SAMPLE_OK;
        fc_warp_check_ticking(window, WARP_MAX_PAIRS, warp_tick, &w);
        ends &= fc_cal_sample(&s1, WARP_RATE_SAMPLE_TRIES, -1) == FC_SAMPLE_OK;
        struct fc_cal_stats st;
        fc_cal_stats(&st);
        double rate = st.rate_ns_per_tick > 0 ? st.rate_ns_per_tick
                      : ends                  ? fc_warp_rate_between(s0.t, s0.mono, s1.t, s1.mono)
                                              : 0;
        int64_t tolerance = fc_warp_sub_ns_cycles(rate);
        int v = fc_warp_verdict(&w, tolerance);
        if (v == FC_WARP_FOUND) {
            /* Checked again at once, and set aside only where that check
             * finds every pair in step: a blip on the host (a 10-cycle warp
             * in 1 of 20 fresh JVMs on an AMD EPYC 1Ah guest, none in the
             * other 19) would otherwise change the mode of one process in
             * many.  A warp that stays is found again within milliseconds;
             * a second check that could not compare every pair (a busy
             * host) disproves nothing, and the warp stands.  Set aside, it
             * is no verdict (status: the second check's in-step result),
             * and the check runs again later (1 s, doubling). */
            struct fc_warp_result again;
            fc_warp_check_ticking(window, WARP_MAX_PAIRS, warp_tick, &again);
            if (fc_warp_verdict(&again, tolerance) == FC_WARP_IN_STEP) {
                if (fc_warp_noted() < 0)
                    fc_warp_note(again.max_warp_cycles);
                return w.stuck && ++stuck_tries >= WARP_MAX_STUCK;
            }
            if (again.max_warp_cycles > w.max_warp_cycles)
                w = again;
        }
        if (v == FC_WARP_NO_VERDICT) {
            /* Some pairs compared, none warped, others not (busy CPUs):
             * status shows the largest warp seen so far (0, a lower bound),
             * and the check runs again, all pairs, until each has been
             * compared -- the pair left out may be the one across sockets. */
            if (w.pairs_tested > 0 && fc_warp_noted() < 0)
                fc_warp_note(0);
            return w.stuck && ++stuck_tries >= WARP_MAX_STUCK; /* no verdict: again later */
        }
        in_step = v == FC_WARP_IN_STEP;
    }
    fc_warp_note(w.max_warp_cycles);
    if (in_step) /* (a verdict of FC_WARP_FOUND, or the seam's, is a warp of 1 cycle or more) */
        return 1;
    struct fc_buf b;
    fc_buf_init(&b, warp_why, sizeof warp_why);
    fc_buf_str(&b, "the TSCs of CPU ");
    fc_buf_i64(&b, w.worst_cpu_a);
    fc_buf_str(&b, " and CPU ");
    fc_buf_i64(&b, w.worst_cpu_b);
    fc_buf_str(&b, " disagree by ");
    fc_buf_i64(&b, w.max_warp_cycles);
    fc_buf_str(&b, " cycles (user-space check_tsc_warp)");
    warp_pending = !fc_mode_switch_to_percpu(warp_why);
    return 1;
}

/* Tours not yet ended (tests wait for them before they reset the slots). */
static _Atomic int live_tours;

/* Pin the calling thread to each allowed CPU in turn and calibrate it there;
 * `stop` (NULL: none) ends the tour at the next CPU. */
static void tour_every_cpu(const cpu_set_t *allowed, int force, _Atomic int *stop)
{
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (!CPU_ISSET(cpu, allowed))
            continue;
        if (stop && atomic_load_explicit(stop, memory_order_acquire))
            break;
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0)
            continue;
        if (fc_seam.tour_cpu)
            fc_seam.tour_cpu(cpu);
        fc_percpu_maintain_cpu(cpu, force);
    }
}

/* A tour on a thread of its own: a CPU slow to take it (a busy one, a
 * real-time task's) stalls the tour, and this thread, the coarse clocks'
 * one ticker, ticks on while it waits.  (Touring itself, it stood still
 * for as long as the CPU took: up to ~1 s under RT throttling, for ever
 * without it.)  `refs`: this thread's and the tour's; the last frees it. */
struct tour {
    cpu_set_t allowed;
    int force;
    struct fc_adjtimex_verdict adjtimex_verdict; /* the calibrator's: the tour has its filters */
    _Atomic int stop;     /* the calibrator is stopping: end at the next CPU */
    _Atomic int done;
    _Atomic int refs;
};

static void tour_release(struct tour *t)
{
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
        free(t);
}

static void *tour_main(void *arg)
{
    struct tour *t = arg;
    pthread_setname_np(pthread_self(), "fastclock-tour");
    fc_sync_inherit_adjtimex_verdict(t->adjtimex_verdict);
    tour_every_cpu(&t->allowed, t->force, &t->stop);
    atomic_store_explicit(&t->done, 1, memory_order_release);
    fc_upkeep_wake();
    tour_release(t);
    atomic_fetch_sub_explicit(&live_tours, 1, memory_order_release);
    return 0;
}

#define TOUR_TICK_NS 1000000LL /* the coarse clocks' tick while a tour runs */
#define TOUR_STOP_WAITS 1000     /* on a stop, 1 ms naps a tour may take to end (~1 s: counted, for
                                    a test's simulated kernel clock may stand still) */

static void calibrate_every_cpu(const cpu_set_t *allowed, int force)
{
    struct tour *t = malloc(sizeof *t);
    pthread_t th;
    if (t) {
        t->allowed = *allowed;
        t->force = force;
        t->adjtimex_verdict = fc_sync_adjtimex_verdict();
        atomic_init(&t->stop, 0);
        atomic_init(&t->done, 0);
        atomic_init(&t->refs, 2);
    }
    /* The tour inherits this thread's mask: every signal blocked. */
    atomic_fetch_add_explicit(&live_tours, 1, memory_order_relaxed);
    if (!t || pthread_create(&th, 0, tour_main, t) != 0) {
        atomic_fetch_sub_explicit(&live_tours, 1, memory_order_relaxed);
        free(t);
        tour_every_cpu(allowed, force, &thread_stop); /* no thread: here, as before, the ticks waiting */
        pthread_setaffinity_np(pthread_self(), sizeof *allowed, allowed);
        return;
    }
    int stop_waits = 0;
    for (;;) {
        int seen = fc_upkeep_wake_count();
        if (atomic_load_explicit(&t->done, memory_order_acquire))
            break;
        /* Stopping: the tour ends at its next CPU (its own flag: a
         * restarted thread clears thread_stop); one that waits for its CPU
         * is left to finish alone (fc_calibrator_reset_for_tests waits for
         * it).  Naps, not futex waits, so that wake-ups do not shorten it. */
        if (atomic_load_explicit(&thread_stop, memory_order_acquire)) {
            atomic_store_explicit(&t->stop, 1, memory_order_release);
            if (++stop_waits > TOUR_STOP_WAITS)
                break;
            struct timespec nap = {0, TOUR_TICK_NS};
            nanosleep(&nap, 0);
        } else {
            fc_upkeep_wait(seen, TOUR_TICK_NS);
        }
        if (fc_coarse_wanted())
            coarse_update();
    }
    if (atomic_load_explicit(&t->done, memory_order_acquire))
        pthread_join(th, 0);
    else
        pthread_detach(th);
    tour_release(t);
}

/* When (fastclock's MONOTONIC) the lines of this mode want recalibrating
 * next: last_cal, when the last calibration ended, plus their interval;
 * for tsc-percpu with no line yet, when the first CPU is due (absolute:
 * counted from last_cal it would be met halfway), at least 1 ms and at
 * most 1 s after last_cal.  last_tour: when the last tour began. */
static int64_t next_calibration(int mode, int64_t last_cal, int64_t last_tour)
{
    if (mode == FC_MODE_PERCPU) {
        if (fc_percpu_to_kernel())
            return last_cal + FC_NS_PER_SEC; /* routed: no lines to keep */
        int64_t until = fc_percpu_idle_until(last_tour);
        if (until)
            return last_cal + fc_clamp_i64(until - last_cal, 1000000, FC_NS_PER_SEC);
        return last_cal + fc_percpu_interval_ns();
    }
    struct fc_cal_stats st;
    fc_cal_stats(&st);
    return last_cal + st.interval_ns;
}

/* The thread's timerfd (-1: none): made by fc_calibrator_start, then the
 * thread's; a fork child closes it (it has no thread) if it is still ours. */
static _Atomic int clock_set_tfd = -1;

static void *calibrator_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "fastclock-cal");
    int tfd = atomic_load_explicit(&clock_set_tfd, memory_order_relaxed);
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        CPU_ZERO(&allowed);
    int64_t last_cal = 0, last_tour = 0, last_tick = 0, last_adj = 0, last_trust = 0;
    uint64_t seen_gen = fc_sync_generation();
    int64_t warp_check_at = 0, warp_retry_ns = WARP_RETRY_NS; /* at -1: done */
    int warp_tries = 0;

    for (;;) {
        /* The wake count before the stop flag: a stop between the two would
         * otherwise leave this thread waiting for a wake already counted. */
        int seen = fc_upkeep_wake_count();
        if (atomic_load_explicit(&thread_stop, memory_order_acquire))
            break;
        int mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
        int active = (mode == FC_MODE_TSC || mode == FC_MODE_PERCPU) &&
                     !fc_upkeep_paused();
        if (!active) {
            if (mode == FC_MODE_UNINIT && fc_decision_wanted() &&
                !fc_upkeep_paused()) {
                /* The process reads the time: decide, a millisecond after
                 * the first read, off the readers' path. */
                fc_upkeep_wait(seen, DECIDE_AFTER_NS);
                fc_decide_now();
                continue;
            }
            if (mode == FC_MODE_SYSTEM)
                fc_coarse_stop_ticking(1);
            /* Not decided yet (the first read wakes us), paused, or system. */
            fc_upkeep_wait(seen, mode == FC_MODE_SYSTEM ? -1 : IDLE_POLL_NS);
            continue;
        }
        int64_t now = fastclock_mono_ns();
        int64_t next = next_calibration(mode, last_cal, last_tour);
        if (fc_coarse_wanted() && last_tick + COARSE_TICK_NS < next)
            next = last_tick + COARSE_TICK_NS;
        int64_t poll_ns = fc_sync_rate_allowance() > 0 ? ADJTIMEX_STEERING_POLL_NS : ADJTIMEX_POLL_NS;
        if (last_adj + poll_ns < next)
            next = last_adj + poll_ns;
        int64_t timeout_ns = next - now;
        if (timeout_ns < 0)
            timeout_ns = 0;

        int force = 0;
        if (tfd >= 0) {
            struct pollfd pfd = {.fd = tfd, .events = POLLIN};
            struct timespec to = {.tv_sec = timeout_ns / FC_NS_PER_SEC, .tv_nsec = timeout_ns % FC_NS_PER_SEC};
            int pr = ppoll(&pfd, 1, &to, 0);
            /* Any event: a file that took the number may report only
             * POLLHUP (a pipe whose writer left), and would wake every
             * ppoll at once from then on. */
            if (pr > 0 && pfd.revents) {
                if (still_our_timer(tfd)) {
                    /* The only wake-up it has: CLOCK_REALTIME was set (or the
                     * machine resumed), read() says ECANCELED.  Recalibrate now
                     * whatever read() says, and re-arm: cancellation is one-shot. */
                    uint64_t v;
                    (void)read(tfd, &v, sizeof v);
                    force = 1;
                    tfd = arm_clock_set_timer(tfd, 0);
                    atomic_store_explicit(&clock_set_tfd, tfd, memory_order_relaxed);
                } else {
                    tfd = -1; /* the program closed it; the number is not ours to touch */
                    atomic_store_explicit(&clock_set_tfd, -1, memory_order_relaxed);
                }
            }
        } else {
            fc_upkeep_wait(seen, timeout_ns);
        }
        if (fc_upkeep_paused())
            continue;
        mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
        if (mode != FC_MODE_TSC && mode != FC_MODE_PERCPU)
            continue;
        if (warp_check_at >= 0 && mode == FC_MODE_TSC && fastclock_mono_ns() >= warp_check_at) {
            if (startup_warp_check(warp_tries++)) {
                warp_check_at = -1;
            } else {
                warp_check_at = fastclock_mono_ns() + warp_retry_ns;
                warp_retry_ns = warp_retry_ns * 2 > WARP_RETRY_MAX_NS ? WARP_RETRY_MAX_NS : warp_retry_ns * 2;
            }
            mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
        } else if (warp_pending) {
            warp_pending = mode == FC_MODE_TSC && !fc_mode_switch_to_percpu(warp_why);
            mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
        }
        now = fastclock_mono_ns();
        if (mode == FC_MODE_TSC && !last_trust) {
            last_trust = now; /* the decision has just read the list */
        } else if (mode == FC_MODE_TSC && now - last_trust >= TRUST_CHECK_NS) {
            last_trust = now;
            if (fc_mode_recheck_kernel_trust())
                mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
        }
        if (now - last_adj >= poll_ns) {
            last_adj = now;
            /* The global line looked at against the kernel, then adjtimex
             * polled: the look is what keeps the line's bound short while
             * nobody reads (sync.c); off beyond its bound, recalibrate now.
             * (tsc-percpu's lines are looked at by their readers and
             * calibrations; a CPU's line is never read past its fast span.) */
            if (mode == FC_MODE_TSC && fc_cal_trylock()) {
                if (atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_TSC && fc_cal_reader_poll())
                    force = 1;
                fc_cal_unlock();
            }
            if (now - fc_sync_last_poll() >= poll_ns / 2)
                fc_sync_poll(now);
        }
        /* adjtimex changed the kernel's rate: recalibrate now, whichever poll
         * saw it (a reader's, calibrating one CPU's line or in status, may
         * have been first; the other lines still want it). */
        uint64_t gen = fc_sync_generation();
        if (gen != seen_gen) {
            seen_gen = gen;
            force = 1;
        }
        /* Tick first: mode tsc's calibration, and starting tsc-percpu's
         * tour (calibrate_every_cpu: a thread of its own, pinned to each CPU
         * in turn, which this thread waits for, ticking), take a moment. */
        if (fc_coarse_wanted()) {
            coarse_update();
            last_tick = now;
        }
        if (force || now >= next_calibration(mode, last_cal, last_tour)) {
            if (mode == FC_MODE_TSC) {
                if (fc_cal_trylock()) {
                    if (atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_TSC)
                        fc_mode_recalibrate();
                    fc_cal_unlock();
                }
            } else if (!fc_percpu_to_kernel()) {
                last_tour = fastclock_mono_ns();
                calibrate_every_cpu(&allowed, force);
            }
            last_cal = fastclock_mono_ns();
            if (fc_coarse_wanted()) /* and again after it: it may have waited */
                coarse_update();
        }
    }
    if (still_our_timer(tfd))
        close(tfd);
    atomic_store_explicit(&clock_set_tfd, -1, memory_order_relaxed);
    return 0;
}

static void calibrator_start(void);

/* errno as it was: this runs in the library's constructor, before main,
 * and in JNI_OnLoad (a refused timerfd, a closed descriptor). */
void fc_calibrator_start(void)
{
    int saved = errno;
    calibrator_start();
    errno = saved;
}

static void calibrator_start(void)
{
    if (fc_upkeep_running())
        return;
    /* The thread must never run a signal handler: block everything it inherits. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128 * 1024);
    atomic_store_explicit(&thread_stop, 0, memory_order_relaxed);
    fc_upkeep_set_running(1);
    /* Started again after a stop: the coarse clocks' hand-over reopens (in
     * mode system the kernel's coarse clocks go on answering: no tick). */
    int resumed = atomic_load_explicit(&fc_mode, memory_order_acquire) != FC_MODE_SYSTEM &&
                  atomic_load_explicit(&fc_coarse.stopped, memory_order_acquire);
    if (resumed)
        fc_coarse_resume_ticking();
    /* Made here, in the library's constructor before main runs, not on the
     * thread beside main, where it could take a number main is about to
     * reuse (close(0) then open("/dev/null")). */
    int tfd = new_clock_set_timer();
    atomic_store_explicit(&clock_set_tfd, tfd, memory_order_relaxed);
    if (pthread_create(&cal_thread, &attr, calibrator_main, 0) != 0) {
        if (resumed)
            fc_coarse_stop_ticking(1); /* no tick will come: closed again, at what was served */
        fc_upkeep_set_running(0);
        atomic_store_explicit(&clock_set_tfd, -1, memory_order_relaxed);
        if (tfd >= 0)
            close(tfd);
    }
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, 0);
}

/* Set by atfork_prepare on the forking thread, read by its atfork_child:
 * the child starts in a new time namespace (kernel.h), and a counter read
 * and the parent's MONOTONIC just before the fork. */
static __thread int fork_changes_timens __attribute__((tls_model("initial-exec")));
static __thread uint64_t fork_parent_t __attribute__((tls_model("initial-exec")));
static __thread int64_t fork_parent_mono __attribute__((tls_model("initial-exec")));

static void fc_calibrator_after_fork_child(void)
{
    /* fork() returns 0 with the errno it had: still_our_timer's
     * timerfd_gettime fails where the program closed or reused the number. */
    int saved = errno;
    fc_mode_after_fork_child();
    /* The thread does not exist in the child: readers calibrate from now on,
     * and its timerfd, if still ours, is closed (nothing waits on it). */
    fc_upkeep_set_running(0);
    int tfd = atomic_exchange_explicit(&clock_set_tfd, -1, memory_order_relaxed);
    if (still_our_timer(tfd))
        close(tfd);
    int64_t switch_floor = 0;
    int lost_switch = fc_cal_reset_in_child(&switch_floor);
    fc_percpu_after_fork_child();
    fc_sync_after_fork_child();
    int new_timeline = fork_changes_timens && fc_mode_after_timens_change(fork_parent_t, fork_parent_mono);
    if (lost_switch && !new_timeline)
        fc_mode_after_lost_switch(switch_floor);
    fork_changes_timens = 0;
    fc_coarse_stop_ticking(!new_timeline); /* a no-op where nothing was served from memory */
    errno = saved;
}

void fc_calibrator_stop(void)
{
    if (!fc_upkeep_running())
        return;
    atomic_store_explicit(&thread_stop, 1, memory_order_release);
    fc_upkeep_wake();
    pthread_join(cal_thread, 0);
    fc_coarse_stop_ticking(1); /* before readers see no thread: no note after the floor */
    fc_upkeep_set_running(0);
}

void fc_calibrator_reset_for_tests(void)
{
    fc_calibrator_stop();
    /* No tour may still calibrate a slot the reset retires. */
    while (atomic_load_explicit(&live_tours, memory_order_acquire) > 0)
        usleep(1000);
    warp_pending = 0;
    fc_upkeep_reset_for_tests();
}

/* ---- process lifecycle ------------------------------------------------- */

/* The thread is started when the library is loaded: a constructor runs in a
 * normal context, never in a signal handler (pthread_create is not
 * async-signal-safe), which the first read cannot promise. */

/* Which of this thread's fork handlers took the writer's lock: bit d for
 * the prepare at nesting depth d (a fork from a signal handler that
 * interrupted this thread's own fork).  Per thread: another thread's fork
 * must never release a lock this one took. */
static __thread unsigned fork_took_lock __attribute__((tls_model("initial-exec")));
static __thread int fork_depth __attribute__((tls_model("initial-exec")));

static void atfork_prepare(void)
{
    int depth = fork_depth++;
    /* Two readlinks per fork (a fork costs a hundred times that). */
    fork_changes_timens = fc_kernel_children_change_timens();
    if (fork_changes_timens) {
        fork_parent_t = fc_now_counter(1);
        fork_parent_mono = fc_kernel_ns(CLOCK_MONOTONIC);
    }
    /* Keep the writer's state whole across fork: wait briefly for a
     * calibration in progress (a few microseconds), never long -- bounded
     * in time, not turns: a sched_yield lasts a scheduler slice on a busy
     * machine, and the holder may be this very thread (fork from a signal
     * handler that interrupted a calibration). */
    if (fc_cal_held_here())
        return; /* this thread's calibration goes on after the handler: no wait helps */
    int64_t give_up = 0;
    for (int i = 0;; i++) {
        if (fc_cal_trylock()) {
            if (depth < 32)
                fork_took_lock |= 1u << depth;
            else
                fc_cal_unlock(); /* nested beyond reason: not held across this fork */
            return;
        }
        if (i < 100) {
            fc_cpu_relax();
            continue;
        }
        int64_t now = fc_kernel_ns(CLOCK_MONOTONIC);
        if (!give_up)
            give_up = now + 2000000; /* 2 ms */
        else if (now > give_up)
            return;
        sched_yield();
    }
}

static void atfork_parent(void)
{
    /* The depth given back last: a fork from a signal handler meanwhile
     * nests one deeper, with a bit of its own, and never sees this one's
     * bit before it is cleared (nor clears it). */
    int depth = fork_depth - 1;
    if (depth >= 0 && depth < 32 && (fork_took_lock & 1u << depth)) {
        fork_took_lock &= ~(1u << depth);
        fc_cal_unlock();
    }
    fork_depth = depth;
}

static void atfork_child(void)
{
    /* The lock prepare took is this thread's: released as in the parent,
     * before the child looks at who else held what. */
    atfork_parent();
    atomic_store_explicit(&live_tours, 0, memory_order_relaxed); /* none crossed the fork */
    fc_calibrator_after_fork_child();
}

void fc_calibrator_start_if_wanted(void)
{
    enum fc_calibrator_pref p = fc_calibrator_pref();
    if (p == FC_CAL_THREAD || (p == FC_CAL_AUTO && !fc_default_lazy))
        fc_calibrator_start();
}

__attribute__((constructor)) static void fc_library_loaded(void)
{
    fc_mode_env_at_load();
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    fc_calibrator_start_if_wanted();
}
