/* Upkeep requests (upkeep.h): a futex word and a few flags. */
#define _GNU_SOURCE
#include "upkeep.h"

#include <limits.h>
#include <stddef.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fastclock_inline.h"
#include "refclock.h"

struct fc_coarse fc_coarse;

/* fastclock_inline.h reads this block through fastclock_coarse_v1: keep its
 * mirror true (a change that moves these does not build). */
_Static_assert(offsetof(struct fc_coarse, mono) == offsetof(struct fastclock_coarse_block_v1, mono) &&
                   offsetof(struct fc_coarse, real) == offsetof(struct fastclock_coarse_block_v1, real) &&
                   offsetof(struct fc_coarse, direct) == offsetof(struct fastclock_coarse_block_v1, kernel_gettime),
               "fastclock_inline.h's struct fastclock_coarse_block_v1 no longer mirrors struct fc_coarse");

static _Atomic int running;
static _Atomic int paused;
static _Atomic int coarse_wanted;
static _Atomic int wake_seq; /* futex word: bumped by every wake-up request */

int fc_upkeep_running(void) { return atomic_load_explicit(&running, memory_order_relaxed); }
void fc_upkeep_set_running(int r) { atomic_store_explicit(&running, r, memory_order_relaxed); }

void fc_upkeep_wake(void)
{
    if (!fc_upkeep_running())
        return;
    atomic_fetch_add_explicit(&wake_seq, 1, memory_order_release);
    syscall(SYS_futex, &wake_seq, FUTEX_WAKE_PRIVATE, INT_MAX, 0, 0, 0);
}

int fc_upkeep_wake_count(void) { return atomic_load_explicit(&wake_seq, memory_order_acquire); }

void fc_upkeep_wait(int seen, int64_t timeout_ns)
{
    struct timespec to = {.tv_sec = (time_t)(timeout_ns / 1000000000LL), .tv_nsec = (long)(timeout_ns % 1000000000LL)};
    syscall(SYS_futex, &wake_seq, FUTEX_WAIT_PRIVATE, seen, timeout_ns >= 0 ? &to : 0, 0, 0);
}

/*
 * The first tick.  Before it, readers serve coarse MONOTONIC from the fine
 * clock; the tick reads the fine clock too, and may have read it before a
 * reader did and publish after that reader returned.  So every value served
 * before the tick is noted in `handover` (a reader returns only after its
 * note is in, or a higher one), and the tick closes the note with one
 * read-modify-write and publishes no less than it: on the one location,
 * either the note came first and the tick sees it, or the close did and
 * the note fails and the reader serves the closed value.  Kernel coarse
 * values would not do here: the line may lag the kernel by its error
 * bound, and the kernel's coarse clock is at times as new as its fine one.
 */
void fc_coarse_publish(int64_t mono, int64_t real)
{
    int64_t last = atomic_load_explicit(&fc_coarse.mono, memory_order_relaxed);
    if (last == 0) {
        last = atomic_fetch_or_explicit(&fc_coarse.handover, FC_COARSE_CLOSED, memory_order_acq_rel) & INT64_MAX;
        atomic_store_explicit(&fc_coarse.stopped, 0, memory_order_relaxed);
    }
    if (mono < last)
        mono = last;
    atomic_store_explicit(&fc_coarse.real, real, memory_order_relaxed);
    atomic_store_explicit(&fc_coarse.mono, mono, memory_order_release);
}

int64_t fc_coarse_serve_before_tick(int64_t fine)
{
    int64_t h = atomic_load_explicit(&fc_coarse.handover, memory_order_acquire);
    for (;;) {
        if (h < 0) {
            /* Closed: the tick took the note and publishes no less -- what
             * it published, or the note until it has (or, the thread
             * stopped meanwhile, the floor it left). */
            int64_t m = atomic_load_explicit(&fc_coarse.mono, memory_order_acquire);
            return m != 0 ? m : fc_coarse_floor();
        }
        if (fine <= h)
            return h; /* another reader served more, and it stands */
        if (atomic_compare_exchange_weak_explicit(&fc_coarse.handover, &h, fine, memory_order_acq_rel,
                                                  memory_order_acquire))
            return fine;
    }
}

void fc_coarse_stop_ticking(int keep_floor)
{
    /* Readers fall back to the kernel's coarse clocks, clamped at the last
     * value served from memory (unless that is another timeline's: a fork
     * into a new time namespace); if none ever was, unclamped, and a direct
     * route to the vDSO (upkeep.h) may stay.  Served from memory: the
     * last tick, or the fine values noted before a first tick -- closed
     * now, as a tick would close it, so that no reader's note comes after
     * the floor is taken (a reader that finds it closed serves the noted
     * value, under the floor). */
    int64_t last = atomic_load_explicit(&fc_coarse.mono, memory_order_relaxed);
    int64_t noted = atomic_fetch_or_explicit(&fc_coarse.handover, FC_COARSE_CLOSED, memory_order_acq_rel) & INT64_MAX;
    if (noted > last)
        last = noted;
    int64_t floor = atomic_load_explicit(&fc_coarse.floor_mono, memory_order_relaxed);
    if (!keep_floor) {
        /* Another timeline's values: the note dropped (closed) first, then
         * no floor. */
        atomic_store_explicit(&fc_coarse.direct, (fc_coarse_fn)0, memory_order_relaxed);
        atomic_store_explicit(&fc_coarse.handover, FC_COARSE_CLOSED, memory_order_relaxed);
        floor = 0;
        atomic_store_explicit(&fc_coarse.floor_mono, floor, memory_order_relaxed);
    } else if (last > floor) {
        atomic_store_explicit(&fc_coarse.direct, (fc_coarse_fn)0, memory_order_relaxed);
        floor = last;
        atomic_store_explicit(&fc_coarse.floor_mono, floor, memory_order_relaxed);
    }
    atomic_store_explicit(&fc_coarse.mono, 0, memory_order_release);
    atomic_store_explicit(&fc_coarse.stopped, 1, memory_order_release);
}

void fc_coarse_resume_ticking(void)
{
    /* A ticker again after a stop (a JNI library loaded anew after
     * JNI_OnUnload stopped it; on a first start the hand-over is open
     * already): until its first tick, readers serve the fine clock through
     * the hand-over (fc_coarse_serve_before_tick), which the stop left
     * closed -- they would serve the stop's floor, however old.  Reopened
     * at the highest value served since: the floor, and anything the
     * kernel's coarse clock gave directly meanwhile (no more than it gives
     * now), which the first tick must not undercut either.  The caller set
     * the thread running first: from then on readers take the hand-over,
     * not `direct`. */
    int64_t open = fc_coarse_floor();
    int64_t k = fc_kernel_ns(CLOCK_MONOTONIC_COARSE);
    if (k > open)
        open = k;
    if (open < 1)
        open = 1; /* open and positive: coarse_slow's re-check below tests > 0 */
    atomic_store_explicit(&fc_coarse.handover, open, memory_order_seq_cst);
    /* The route dropped after: a reader that set it meanwhile finds the
     * hand-over reopened and drops it too (coarse_slow).  A read through
     * the route in between is the kernel's coarse clock of that moment: k,
     * or one kernel tick later, which the first tick's line value (the
     * fine clock, at or after it) does not undercut beyond the line's
     * error bound. */
    atomic_store_explicit(&fc_coarse.direct, (fc_coarse_fn)0, memory_order_seq_cst);
}

void fc_coarse_request(void)
{
    if (!atomic_load_explicit(&coarse_wanted, memory_order_relaxed)) {
        atomic_store_explicit(&coarse_wanted, 1, memory_order_relaxed);
        fc_upkeep_wake();
    }
}

int fc_coarse_wanted(void) { return atomic_load_explicit(&coarse_wanted, memory_order_relaxed); }

void fc_upkeep_pause(int p)
{
    atomic_store_explicit(&paused, p, memory_order_release);
    fc_upkeep_wake();
}

int fc_upkeep_paused(void) { return atomic_load_explicit(&paused, memory_order_acquire); }

void fc_upkeep_reset_for_tests(void)
{
    atomic_store(&coarse_wanted, 0);
    atomic_store(&paused, 0);
    atomic_store_explicit(&fc_coarse.mono, 0, memory_order_relaxed);
    atomic_store_explicit(&fc_coarse.real, 0, memory_order_relaxed);
    atomic_store_explicit(&fc_coarse.floor_mono, 0, memory_order_relaxed);
    atomic_store_explicit(&fc_coarse.direct, (fc_coarse_fn)0, memory_order_relaxed);
    atomic_store_explicit(&fc_coarse.handover, 0, memory_order_relaxed);
    atomic_store_explicit(&fc_coarse.stopped, 0, memory_order_relaxed);
}
