/* The kernel's synchronisation state (adjtimex), cached for error bounds
 * and for calibration policy.  Sampled by the calibrator thread every 10 ms
 * (4 ms while steered), by every calibration, and by lazy readers once per
 * millisecond of reading (calibration.c); never on every read. */
#ifndef FC_SYNC_H
#define FC_SYNC_H

#include <stdint.h>

#include "kernel.h"

struct fc_sync_snapshot {
    int known;             /* 0: never sampled (or adjtimex unavailable) */
    int synchronized;      /* 1: a time daemon disciplines the kernel (no STA_UNSYNC, no TIME_ERROR);
                              0: not; -1: unknown (adjtimex answered once, refused since) */
    int steering;          /* the kernel's rate may change under us (see sync.c) */
    int leap_pending;      /* +1 insert, -1 delete, 0 none */
    int64_t maxerror_ns;   /* the kernel's maximum error now (grown at 500 ppm since sampled) */
    int64_t esterror_ns;
    int64_t tai_offset_s;
    long freq_scaled;      /* ppm << 16 */
    long tick_us;
    int64_t age_ns;        /* since sampled */
};

/* Reads adjtimex now (through the seam in tests) and updates the cache.
 * Returns 1 if something that changes the kernel's rate changed, 0 if not;
 * where a poll was in progress, whose result (possibly a change) may not
 * show in the generation yet: FC_SYNC_POLL_BUSY (another thread's: a caller
 * that must not miss a change waits a moment or tries again later) or
 * FC_SYNC_POLL_MINE (this thread's, under a signal handler nested in it:
 * it cannot be waited for). */
#define FC_SYNC_POLL_BUSY (-1)
#define FC_SYNC_POLL_MINE (-2)
int fc_sync_poll(int64_t mono_now_ns);
/* The cached state extrapolated to mono_now_ns. */
void fc_sync_get(int64_t mono_now_ns, struct fc_sync_snapshot *out);
/* How fast the kernel's rate may drift away from a line, as a fraction:
 * 0 when nothing steers the kernel, else the largest frequency change
 * adjtimex allows (2 x 500 ppm) plus any tick adjustment. */
double fc_sync_rate_allowance(void);
/* Counts changes of the kernel's rate settings seen by any poll. */
uint64_t fc_sync_generation(void);
/* Size of the last change seen, as a fraction of the rate (freq and tick). */
double fc_sync_last_change(void);
/* That size if the change was seen in the last few seconds, else 0. */
double fc_sync_recent_change(int64_t mono_now_ns);
/* Error a line built for adjtimex tick `tick_us` (0: not known), last found
 * within its bound of the kernel at `checked_mono`, may have picked up by
 * now from rate changes (see sync.c). */
int64_t fc_sync_exposure_ns(int64_t checked_mono, long tick_us, int64_t now);
/* The largest rate change adjtimex permits away from tick `tick_us` (0: not
 * known: from anywhere in its range), as a fraction: what exposure charges
 * per ns. */
double fc_sync_unseen_rate(long tick_us);
/* REALTIME - MONOTONIC as the last answered poll found it, just before
 * its adjtimex: only a step moves it, and a step resets the kernel's
 * maxerror and sets STA_UNSYNC.  A caller that finds it moved since knows
 * the cached state predates the step.  Read it before fc_sync_get.  0
 * while no poll measured it. */
int fc_sync_wall_offset(int64_t *offset_ns);
/* When the last answered poll ran, or this thread's own last refused one,
 * the later (0: neither): polls pace themselves by it (sync.c). */
int64_t fc_sync_last_poll(void);
/* Readers (either calibrator) look at adjtimex once per this much reading;
 * so do the status and bounded reads that find the state stale. */
#define FC_READER_POLL_NS 1000000LL
/* Whether a poll is due at mono by that pace. */
static inline int fc_sync_poll_due(int64_t mono)
{
    return mono - fc_sync_last_poll() >= FC_READER_POLL_NS;
}
void fc_sync_after_fork_child(void);
/* A fork child in a new time namespace: the polls' MONOTONIC times are
 * another timeline's (a maxerror aged from them would be wrong); the next
 * reader polls afresh. */
void fc_sync_forget(void);
void fc_sync_reset_for_tests(void);
/* This thread's answer to "would adjtimex kill me?" (verdict 0 not asked,
 * 1 no, -1 yes) and the seccomp filters it holds for (kernel.h), and a
 * thread's start with its creator's: a thread made by one that asked has
 * exactly its seccomp filters (calibrator.c's tours). */
struct fc_adjtimex_verdict {
    int verdict;
    struct fc_seccomp_seen seen;
};
struct fc_adjtimex_verdict fc_sync_adjtimex_verdict(void);
void fc_sync_inherit_adjtimex_verdict(struct fc_adjtimex_verdict v);

/* The kernel's tick (us) and frequency (adjtimex units) at the last poll;
 * 0 while never polled, or while polls are refused since. */
int fc_sync_settings(long *freq, long *tick);

#endif
