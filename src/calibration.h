/* Calibration: measuring the kernel's clocks against the counter and
 * publishing the lines readers evaluate. */
#ifndef FC_CALIBRATION_H
#define FC_CALIBRATION_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#define FC_HIST 16

/* One minimum-latency sample of the kernel's clocks. */
struct fc_sample {
    uint64_t t;        /* counter at the middle of the tightest bracket */
    uint64_t t0;       /* counter at its start: the kernel read came no earlier */
    uint64_t width;    /* bracket width in ticks */
    int64_t mono;      /* CLOCK_MONOTONIC, ns */
    int offsets_ok;
    int tai_ok;
    int64_t real_off;  /* REALTIME - MONOTONIC */
    int64_t boot_off;  /* BOOTTIME - MONOTONIC */
    int64_t tai_off;   /* TAI - REALTIME */
    /* CLOCK_MONOTONIC_RAW in its own counter bracket: adjtimex does not
     * move it, so its rate against the counter tells a kernel rate change
     * nobody polled from a change of the counter's own rate. */
    int raw_ok;
    uint64_t raw_t, raw_width;
    int64_t raw;
};

enum fc_sample_result {
    FC_SAMPLE_OK = 0,
    FC_SAMPLE_NOISY = -1,      /* no bracket tight enough (preempted every try) */
    FC_SAMPLE_BACKWARDS = -2,  /* the counter went back within a bracket */
    FC_SAMPLE_ERROR = -3,      /* the kernel's clocks could not be read */
    FC_SAMPLE_MIGRATED = -4,   /* per-CPU sample: the thread kept changing CPUs */
};
/* cpu < 0: ordered reads on any CPU; cpu >= 0: rdtscp reads that must all
 * come from that CPU (TSC_AUX), for per-CPU lines.  errno as it was. */
int fc_cal_sample(struct fc_sample *s, int tries, int cpu);
/* BOOTTIME - MONOTONIC as every line carries it (one value for all lines,
 * raised only by a suspend); `otherwise` before any sample measured it. */
int64_t fc_cal_boot_offset(int64_t otherwise);

/* The writer state of one line (global, or one CPU's). */
struct fc_cal_state {
    struct fc_sample hist[FC_HIST];
    int n;
    double rate;       /* ns per tick */
    double rate_unc;   /* relative uncertainty of rate */
    int64_t interval_ns;
    int noisy_in_a_row;
    int resets_recent;
    int64_t last_reset_mono;
    int64_t step_mono[3];     /* per-CPU: kernel MONOTONIC of the counter's last three steps (0: none) */
    int64_t last_ok_mono;    /* kernel MONOTONIC at the last published line */
    int64_t failing_since;   /* kernel MONOTONIC of the first failure since, or 0 */
    int resume_lapsed;       /* after a suspend: the old line had lapsed before the resume */
    int remeasure;           /* a per-CPU rate jump was refused: no line until two samples
                                after it measure the rate */
    uint64_t sync_generation; /* the kernel's rate settings the history describes */
    int settings_known;       /* ... and those settings (adjtimex tick and frequency) */
    double jump_ref;          /* the rate before the counter changed its own (RAW said so), judged once the
                                 samples after it measure the new one to 1e-4 (rescaled with the settings,
                                 dropped at a suspend); 0: none */
    long set_tick, set_freq;
    uint64_t calibrations;
    struct fc_sample decided; /* the global track's sample at the decision (width 0: none) */
    int baseline_restarts;    /* the first line's baseline started over for an adjtimex change */
};

/* A line and its writer: the global one, or one per CPU in tsc-percpu mode. */
struct fc_track {
    struct fc_latch *latch;
    struct fc_cal_state *cs;
    _Atomic int *lock;
    int cpu;           /* -1: the global line */
};

FC_HIDDEN extern struct fc_track fc_global_track;

int fc_track_trylock(const struct fc_track *t);
void fc_track_unlock(const struct fc_track *t);
/* In a fork child: a track's lock held by a thread that is gone (the fork
 * handler's wait for it gave up) is freed, and the history that thread may
 * have half shifted starts again (from one sample, at the rate kept, from
 * the line as it stands: BUILD_RESUMED); this thread's own lock stays. */
void fc_track_free_in_child(_Atomic int *lock, struct fc_cal_state *cs);

/* The global lock (the global track's). */
int fc_cal_trylock(void);
void fc_cal_unlock(void);
/* Whether this thread holds it: a signal handler that interrupted the holder
 * must not wait for it (it would wait for itself). */
int fc_cal_held_here(void);
/* In a fork child: a lock another thread held is freed, and what its
 * calibration left half done is undone; this thread's own calibration
 * (fork from a handler that interrupted it) goes on.  Returns 1 where the
 * thread that is gone was leaving the global line (between
 * fc_cal_global_ceiling and its _done: a warp, a fail-safe), with in
 * *floor_ns the ceiling its readers and fallbacks may have reached; the
 * caller (mode.c) finishes that switch, which the child has lost. */
int fc_cal_reset_in_child(int64_t *floor_ns);
/* A fork child in a new time namespace (mode.c fc_mode_after_timens_change,
 * under the lock): the MONOTONIC values fallbacks noted, the BOOTTIME offset
 * and the line are another timeline's; a blank line replaces it. */
void fc_cal_forget_timeline(void);

/* With the lock held, at the mode decision: the first calibration sample.
 * Returns 0, or -1 with a reason written to why.  The first line follows
 * from fc_cal_recalibrate at least 20 us later. */
int fc_cal_begin(char *why, size_t why_size);
/* A rate measured before a track starts (every CPU's first line starts from
 * one CPU's), with the kernel's adjtimex settings it was measured under. */
struct fc_rate_seed {
    double rate, unc;
    int settings_known;
    long tick, freq;
};
/* For a seed just measured: poll adjtimex and note its settings; returns
 * the poll's result (fc_sync_poll: FC_SYNC_POLL_BUSY or _MINE where a poll
 * was in progress). */
int fc_rate_seed_settings(struct fc_rate_seed *seed, int64_t mono_now);
/* With the track's lock held: first line of a track, from one sample and
 * the seed's rate, rescaled to the settings now. */
int fc_track_start(const struct fc_track *t, const struct fc_rate_seed *seed);

enum fc_recal_result {
    FC_RECAL_OK = 0,
    FC_RECAL_SKIPPED = -1,   /* no sample this time; the line stays */
    FC_RECAL_FAILED = -2,    /* the track cannot be trusted (global: mode.c leaves tsc) */
    FC_RECAL_WARP = -3,      /* global, lazy: samples on two CPUs disagree (mode.c: tsc-percpu) */
};
/* With the track's lock held: sample and publish a corrected line. */
int fc_track_recalibrate(const struct fc_track *t);
int fc_cal_recalibrate(void); /* the global track; publishes the first line when due */
/* With the track's lock held, its fast span run out (or the thread's 10 ms
 * look): look at the line against the kernel, poll adjtimex (at most once a
 * millisecond), and republish the line, checked now where the look could
 * tell, its fast span a poll interval on.  Returns 1 when the line wants
 * recalibrating instead (off the kernel beyond its bound or at its edge,
 * the kernel unreadable, the kernel's settings changed, or past its soft
 * span). */
int fc_track_poll(const struct fc_track *t);
/* The global track's (mode tsc, lock held). */
int fc_cal_reader_poll(void);

void fc_cal_set_ticks_rate(double rate_ns_per_tick);
/* After FC_RECAL_FAILED on the global track: why (mode.c says what follows). */
const char *fc_cal_failure_reason(void);
/* A fallback read of the global line (the kernel answers while another
 * thread recalibrates) wants to return MONOTONIC value `mono`; `ceiling` is
 * the line's own value at the reader's counter, held at the line's end, and
 * `beyond` the same value not held there; `epoch` is the line's.  `line`
 * (NULL: none; else a line, mult != 0) and `held_span`: the line, and the span from its base at
 * which `mono` was held (up to its uncut end), for a ceiling nearer that
 * where a writer has said how far its new line covers the old one.
 * Returns what it may return without any later line undercutting it (see
 * calibration.c).  Async-signal-safe, never waits long. */
int64_t fc_cal_fallback_value(int64_t mono, int64_t ceiling, int64_t beyond, uint64_t epoch,
                              const struct fc_line *line, uint64_t held_span);
/* The highest value a fallback read noted (tests: testing.c). */
int64_t fc_cal_fallback_noted(void);
#define FC_FALLBACK_RETRY INT64_MIN /* the writer just published: read the new line */
/* The lazy warp check's largest disagreement so far, in cycles (-1: no two
 * CPUs compared yet), and the CPUs that showed it. */
int64_t fc_cal_lazy_warp(int *cpu_a, int *cpu_b);
/* The calibrator thread runs (1) or not: lines may live longer with it. */
/* Publish a global line that routes every read to the slow path (mode
 * system, or tsc-percpu), with a MONOTONIC floor. */
void fc_cal_publish_system(int64_t floor_ns);
/* An upper bound on anything the global line and its fallbacks have
 * returned so far, and will return until fc_cal_global_ceiling_done: from
 * here on a fallback read returns no more than it (the handshake a line's
 * publication makes, held until the mode that takes over is published).
 * With the global track's lock held; the caller publishes the next mode
 * (fc_mode_enter) and then calls fc_cal_global_ceiling_done. */
int64_t fc_cal_global_ceiling(void);
void fc_cal_global_ceiling_done(void);

/* Bookkeeping for fastclock_status (read without the lock; approximate). */
struct fc_cal_stats {
    uint64_t calibrations;
    int64_t last_err_ns, max_err_ns, last_width_ns, interval_ns;
    uint64_t realtime_steps, rate_resets;
    double rate_ns_per_tick;
    uint64_t warp_raw_compares; /* lazy warp check: pairs of CPUs compared on MONOTONIC_RAW */
};
void fc_cal_stats(struct fc_cal_stats *out);
/* Counter ticks -> ns at the global line's rate; 0 where no line has set one yet. */
int fc_cal_ticks_to_ns(int64_t ticks, int64_t *ns);
/* Error bound of a line at a given age, in ns. */
int64_t fc_meta_bound(const struct fc_meta *m, int64_t mono_now);

/* Limits (tests may shrink max_interval). */
FC_HIDDEN extern int64_t fc_cal_max_interval_ns;
/* Tests: forget all calibration state. */
void fc_cal_reset_for_tests(void);

#endif
