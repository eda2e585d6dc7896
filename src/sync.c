/*
 * The kernel's synchronisation state.
 *
 * Why it matters here: fastclock tracks the kernel's CLOCK_MONOTONIC, whose
 * rate NTP may change at any moment through adjtimex.  Between two
 * calibrations a line can drift from the kernel by (rate change) x (age).
 * When no daemon disciplines the clock (STA_UNSYNC, no recent frequency
 * change, no offset being slewed) the rate is constant and the line's own
 * calibration error is the whole story; otherwise the error bound must
 * allow for the largest change adjtimex permits (frequency within +-500
 * ppm, so up to 1000 ppm between two settings, plus tick adjustments), and
 * calibrations come every 10 ms to keep that bound in microseconds.
 *
 * For REALTIME, the kernel's own maxerror (grown by 500 ppm per second
 * since the daemon last set it, as the kernel does) is added: that is how
 * far the kernel itself may be from true UTC.
 */
#define _GNU_SOURCE
#include "sync.h"

#include <stdatomic.h>
#include <string.h>
#include <sys/timex.h>

#include "internal.h"

#define STEERING_HOLD_NS (5LL * FC_NS_PER_SEC)
#define MAXFREQ_PPM 500.0
#define NTP_PHASE_LIMIT_NS (16LL * FC_NS_PER_SEC) /* the kernel's cap on maxerror */

static struct {
    _Atomic int known;
    _Atomic int synchronized;
    _Atomic int leap;
    _Atomic int64_t maxerror_us, esterror_us, tai;
    _Atomic long freq, tick, offset;
    _Atomic int status;
    _Atomic int64_t sampled_mono;
    _Atomic int64_t steering_until;
} sync_state;

static int kernel_adjtimex(struct timex *tx)
{
    if (fc_seam.adjtimex)
        return fc_seam.adjtimex(tx);
    return adjtimex(tx);
}

int fc_sync_poll(int64_t now)
{
    struct timex tx;
    memset(&tx, 0, sizeof tx);
    int state = kernel_adjtimex(&tx);
    if (state < 0)
        return 0;
    long offset = (tx.status & STA_PLL) ? tx.offset : 0;
    struct timex ss;
    memset(&ss, 0, sizeof ss);
    ss.modes = ADJ_OFFSET_SS_READ;
    if (kernel_adjtimex(&ss) >= 0 && ss.offset != 0)
        offset = ss.offset; /* an adjtime(3) slew is running (500 ppm) */

    int changed = 0;
    if (atomic_load_explicit(&sync_state.known, memory_order_relaxed)) {
        changed = tx.freq != atomic_load_explicit(&sync_state.freq, memory_order_relaxed) ||
                  tx.tick != atomic_load_explicit(&sync_state.tick, memory_order_relaxed) ||
                  ((tx.status ^ atomic_load_explicit(&sync_state.status, memory_order_relaxed)) &
                   (STA_PLL | STA_FLL | STA_UNSYNC | STA_FREQHOLD));
    }
    if (changed || offset != 0)
        atomic_store_explicit(&sync_state.steering_until, now + STEERING_HOLD_NS, memory_order_relaxed);

    int synced = !(tx.status & STA_UNSYNC) && state != TIME_ERROR;
    atomic_store_explicit(&sync_state.synchronized, synced, memory_order_relaxed);
    atomic_store_explicit(&sync_state.leap,
                          (tx.status & STA_INS) ? 1 : (tx.status & STA_DEL) ? -1 : 0, memory_order_relaxed);
    atomic_store_explicit(&sync_state.maxerror_us, tx.maxerror, memory_order_relaxed);
    atomic_store_explicit(&sync_state.esterror_us, tx.esterror, memory_order_relaxed);
    atomic_store_explicit(&sync_state.tai, tx.tai, memory_order_relaxed);
    atomic_store_explicit(&sync_state.freq, tx.freq, memory_order_relaxed);
    atomic_store_explicit(&sync_state.tick, tx.tick, memory_order_relaxed);
    atomic_store_explicit(&sync_state.offset, offset, memory_order_relaxed);
    atomic_store_explicit(&sync_state.status, tx.status, memory_order_relaxed);
    atomic_store_explicit(&sync_state.sampled_mono, now, memory_order_relaxed);
    atomic_store_explicit(&sync_state.known, 1, memory_order_release);
    return changed;
}

static int steering_now(void)
{
    if (!atomic_load_explicit(&sync_state.known, memory_order_acquire))
        return 0;
    int64_t sampled = atomic_load_explicit(&sync_state.sampled_mono, memory_order_relaxed);
    return atomic_load_explicit(&sync_state.synchronized, memory_order_relaxed) ||
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
    out->age_ns = now - atomic_load_explicit(&sync_state.sampled_mono, memory_order_relaxed);
    if (out->age_ns < 0)
        out->age_ns = 0;
    /* The kernel adds MAXFREQ (500 ppm) to maxerror every second, up to
     * NTP_PHASE_LIMIT (16 s); so do we. */
    out->maxerror_ns = atomic_load_explicit(&sync_state.maxerror_us, memory_order_relaxed) * 1000 +
                       (int64_t)((double)out->age_ns * MAXFREQ_PPM * 1e-6);
    if (out->maxerror_ns > NTP_PHASE_LIMIT_NS)
        out->maxerror_ns = NTP_PHASE_LIMIT_NS;
    out->esterror_ns = atomic_load_explicit(&sync_state.esterror_us, memory_order_relaxed) * 1000;
    out->tai_offset_s = atomic_load_explicit(&sync_state.tai, memory_order_relaxed);
    out->freq_scaled = atomic_load_explicit(&sync_state.freq, memory_order_relaxed);
    out->tick_us = atomic_load_explicit(&sync_state.tick, memory_order_relaxed);
}

void fc_sync_reset_for_tests(void)
{
    memset(&sync_state, 0, sizeof sync_state);
}
