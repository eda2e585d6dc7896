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
 * Who calibrates.  A background thread where one is allowed (calibrator.c);
 * otherwise readers that find the line due take a try-lock and recalibrate
 * inline.  Lazy calibration is what keeps the library correct where a
 * thread cannot be: in a forked child (POSIX allows no thread creation
 * there before exec), in the preload shim (a thread in every process would
 * break programs that must stay single-threaded, e.g. for
 * unshare(CLONE_NEWUSER)), when the first read comes from a signal handler,
 * or when the thread is starved.  Both paths run the same code under the
 * same lock, and readers never wait for it.  Either way a line's fast span
 * ends at the next adjtimex poll, one millisecond of reading later: the
 * reader that gets there polls and extends it (fc_track_poll).  That keeps
 * the bound near 0.1 ms and the error after a rate change near 1 us; the
 * thread's own polls (every 10 ms, each wake-up 60-70 us of CPU in a KVM
 * guest) alone would leave ~1 ms and ~5 us (sync.c, measured in
 * tests/realkernel).
 *
 * Tracks.  The same code calibrates the global line and, in tsc-percpu
 * mode, one line per CPU (percpu.c), whose samples must be taken on that
 * CPU (TSC_AUX from rdtscp, checked before and after the kernel read).
 */
#define _GNU_SOURCE
#include "calibration.h"

#include <string.h>

#include "fmt.h"
#include "sync.h"
#include "upkeep.h"
#include "warp.h"

#define FC_MAX_SLEW 500e-6
#define FC_MIN_INTERVAL_NS 100000LL        /* first refinements: 100 us */
#define FC_STEERING_INTERVAL_NS 10000000LL /* while NTP may change the rate: 10 ms */
#define FC_JUMP_NS 1000LL                  /* behind by more: step forward */
#define FC_TARGET_ERR_NS 100.0             /* spans are cut so drift stays below this */
#define FC_PAST_MARGIN_NS 2000.0           /* pivot before publication, beyond any speculation */
#define FC_MAX_WIDTH_NS 50000.0            /* a wider bracket is not a sample */
#define FC_SAMPLE_TRIES 8
#define FC_SUSPEND_NS 1000000LL            /* BOOTTIME - MONOTONIC growth that means a suspend */
#define FC_GIVE_UP_NS (15LL * FC_NS_PER_SEC) /* a track failing this long is not trusted */
#define FC_FIRST_BASELINE_NS 20000LL
/* The kernel's clock may change rate a little without adjtimex showing it:
 * a clocksource switch (tsc <-> kvm-clock measured ~1.5 ppm apart). */
#define FC_UNSEEN_RATE 5e-6        /* first rate: two samples this far apart */

int64_t fc_cal_max_interval_ns = 500000000LL;

static struct fc_cal_state global_state FC_LARGE_BSS; /* 1.7 KB, first written by the decision */
static _Atomic int global_lock;
struct fc_track fc_global_track = {&fc_latch, &global_state, &global_lock, -1};

/* Published statistics (relaxed atomics: status may read them anytime). */
static struct {
    _Atomic uint64_t calibrations;
    _Atomic int64_t last_err_ns, max_err_ns, last_width_ns, interval_ns;
    _Atomic uint64_t realtime_steps, rate_resets, warp_raw_compares;
    _Atomic double rate;
} stats;

/* Set by the calibrator thread while it runs: lines may then live longer. */

/*
 * Fallback reads (the kernel answers while another thread recalibrates) and
 * the global line's writer.  A kernel value a fallback returns may lie above
 * the next line (anchored at its sample; after a rate change its rate lags
 * the kernel's).  So:
 *   - a fallback notes its value in `noted` (seq_cst), then looks at
 *     `publishing`; if it is down it returns its value and records it in
 *     `returned`; if it is up it returns max(its line's ceiling, `returned`);
 *   - the writer raises `publishing` (the new line's epoch), then reads
 *     `noted` and lifts the new line above it before publishing, and lowers
 *     `publishing` once the line's end is final (the `seen` extension).
 * Dekker: a fallback that saw `publishing` down noted its value before the
 * writer read `noted`, so every returned value is under the new line; and
 * max(ceiling, returned) is at least every value returned so far, and under
 * the new line too.  A fallback that read the old line holds at its end
 * (or its cut: beyond it the old line may lie above the new one).  One that
 * read the new line before its end was final may be past that end, beyond
 * old-line reads made before it showed: it takes the new line's value at
 * its counter, which is at least any of those (the pivot rule), and notes
 * it for the line after to be lifted over.  Nobody waits long.
 */
static struct {
    _Atomic int64_t noted __attribute__((aligned(64))); /* every value a fallback meant to return */
    _Atomic int64_t returned;                           /* the values fallbacks did return */
    _Atomic uint64_t publishing;                        /* the epoch of a line being published, or 0 */
    /* Stored before `publishing` is raised: the counter at which the
     * writer built the line being published (its final attempt's `now`),
     * and the epoch of the old line it replaces.  An ordered read of the new
     * line at counter t >= u returns at least the old line's value at
     * min(u, covered_to): at or above the old line up to the pivot, which
     * lies beyond `now` (or from P on, for a steeper line or a step; the
     * same line continued; or above its uncut end, F -- except after a
     * resume the old line lapsed before, where the new line starts at the
     * kernel's time: then nothing is said). */
    _Atomic uint64_t covered_to, covered_epoch;
} fallback;

#define FALLBACK_SPINS 256 /* ~10 us of pause */

/* `publishing` while the mode leaves the global line (fc_cal_global_ceiling):
 * no line's epoch. */
#define PUBLISHING_A_SWITCH UINT64_MAX

static void atomic_max64(_Atomic int64_t *p, int64_t v)
{
    int64_t cur = atomic_load_explicit(p, memory_order_relaxed);
    while (v > cur && !atomic_compare_exchange_weak_explicit(p, &cur, v, memory_order_seq_cst, memory_order_relaxed)) {
    }
}

/* Set by the global track's writer for the few instructions it publishes:
 * a signal handler on that same thread must not wait for it.  (Spinning
 * there cost ~10 us a read; a handler with several reads that outlasted
 * its timer's period was re-entered before the writer could go on, and the
 * thread never left its handlers: guarantees_test SignalSafety, lazy.) */
static __thread int publishing_here __attribute__((tls_model("initial-exec")));

/* The writer's side of the handshake with fc_cal_fallback_value: `tag` (a
 * line's epoch, or PUBLISHING_A_SWITCH) raised, then fenced, so that either
 * a fallback sees it or its note is seen by the writer's next load of
 * `noted` (Dekker); and lowered again.  publishing_here keeps a signal
 * handler on the writer's own thread from waiting for it. */
static void raise_publishing(uint64_t tag)
{
    publishing_here = 1;
    atomic_signal_fence(memory_order_seq_cst);
    atomic_store_explicit(&fallback.publishing, tag, memory_order_seq_cst);
    atomic_thread_fence(memory_order_seq_cst);
}

static void lower_publishing(void)
{
    atomic_store_explicit(&fallback.publishing, 0, memory_order_seq_cst);
    atomic_signal_fence(memory_order_seq_cst);
    publishing_here = 0;
}

int64_t fc_cal_fallback_value(int64_t mono, int64_t ceiling, int64_t beyond, uint64_t epoch,
                              const struct fc_line *line, uint64_t held_span)
{
    atomic_max64(&fallback.noted, mono);
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load_explicit(&fallback.publishing, memory_order_seq_cst)) {
        /* Not below what an earlier fallback returned from a line being
         * published (below), which may lie past that line's final end. */
        atomic_max64(&fallback.returned, mono);
        int64_t r = atomic_load_explicit(&fallback.returned, memory_order_acquire);
        return r > mono ? r : mono;
    }
    /* The writer is publishing (a few instructions): let it finish and read
     * the new line instead.  If it does not (preempted), or this is a signal
     * handler that interrupted it, a value it is sure to cover. */
    for (int i = 0; i < FALLBACK_SPINS && !publishing_here; i++) {
        fc_cpu_relax();
        if (!atomic_load_explicit(&fallback.publishing, memory_order_acquire))
            return FC_FALLBACK_RETRY;
    }
    int64_t c = ceiling;
    /* Held past the old line's cut end (a cut that showed late: this thread
     * may have read the uncut line there): as far as the new line covers
     * the old one, which the writer said before raising `publishing`. */
    /* (Two writers' stores mixed by a reader preempted between these loads
     * go with a new line published meanwhile: the caller's seq check
     * throws the value away.) */
    if (line && atomic_load_explicit(&fallback.publishing, memory_order_acquire) == PUBLISHING_A_SWITCH) {
        /* The mode leaving the line: its ceiling covers the line as far as
         * any reader may have read it -- this one up to held_span, which
         * it may have read before the cut showed (a writer preempted
         * between choosing the cut and publishing it).  Held there, not at
         * the cut: that would be below what this thread had. */
        int64_t v = (int64_t)(fc_line_eval_fixed(line, (int64_t)held_span) >> FC_SHIFT);
        if (v > c)
            c = v;
    }
    if (line && epoch == atomic_load_explicit(&fallback.covered_epoch, memory_order_acquire)) {
        uint64_t to = atomic_load_explicit(&fallback.covered_to, memory_order_acquire) - line->base_tsc;
        uint64_t span = held_span < to ? held_span : to;
        if ((int64_t)to > 0 && (int64_t)span > 0) {
            int64_t v = (int64_t)(fc_line_eval_fixed(line, (int64_t)span) >> FC_SHIFT);
            if (v > c)
                c = v;
        }
    }
    if (beyond > c && epoch == atomic_load_explicit(&fallback.publishing, memory_order_acquire)) {
        /* The line being published, read past its first end: its value
         * here.  Noted, then the publication checked again (Dekker with the
         * next writer's handshake): still this one, so the line after is
         * lifted over it.  Recorded: no later fallback returns less. */
        atomic_max64(&fallback.noted, beyond);
        atomic_thread_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&fallback.publishing, memory_order_seq_cst) != epoch)
            return FC_FALLBACK_RETRY;
        atomic_max64(&fallback.returned, beyond);
        c = beyond;
    }
    int64_t r = atomic_load_explicit(&fallback.returned, memory_order_acquire);
    return r > c ? r : c;
}

int64_t fc_cal_fallback_noted(void)
{
    return atomic_load_explicit(&fallback.noted, memory_order_acquire);
}

/* For fastclock_ticks_to_ns: the global rate in fixed point, or 0. */
static _Atomic int64_t ticks_mult;

/* A lock holds its owner's id: each thread's own, nonzero, taken at its
 * first try.  A fork child, where only the forking thread lives on, then
 * frees exactly the locks that other threads held (fc_track_free_in_child).
 * A handler that interrupts the taking of an id takes one of its own
 * first; the thread keeps the one stored last, and no lock stays held
 * under the other once the handler has returned. */
static _Atomic unsigned owner_ids;
static __thread int owner_here __attribute__((tls_model("initial-exec")));

static int lock_owner_id(void)
{
    int id = owner_here;
    if (FC_UNLIKELY(id == 0)) {
        unsigned n = atomic_fetch_add_explicit(&owner_ids, 1u, memory_order_relaxed) + 1u;
        id = (int)(n & 0x7fffffffu); /* unsigned: wraps without overflow */
        if (FC_UNLIKELY(id == 0))
            id = 1; /* 2^31 threads later: shared with another, as every id was before */
        owner_here = id;
    }
    return id;
}

int fc_track_trylock(const struct fc_track *t)
{
    int expected = 0;
    return atomic_compare_exchange_strong_explicit(t->lock, &expected, lock_owner_id(), memory_order_acquire,
                                                   memory_order_relaxed);
}

static int track_lock_is_mine(const _Atomic int *lock)
{
    return owner_here != 0 && atomic_load_explicit(lock, memory_order_relaxed) == owner_here;
}

void fc_track_free_in_child(_Atomic int *lock, struct fc_cal_state *cs)
{
    if (track_lock_is_mine(lock))
        return;
    if (atomic_load_explicit(lock, memory_order_relaxed))
        cs->n = 0;
    atomic_store_explicit(lock, 0, memory_order_relaxed);
}

void fc_track_unlock(const struct fc_track *t)
{
    atomic_store_explicit(t->lock, 0, memory_order_release);
}

/* Raised before the lock is taken and lowered after it is released, so
 * that a handler on the holder's thread always sees it while the lock is
 * held.  A count, not a flag: a handler that interrupts this thread between
 * raising it and its try, and takes and releases the lock itself, must
 * leave it raised for the try it interrupted. */
static __thread int cal_held_here __attribute__((tls_model("initial-exec")));

int fc_cal_trylock(void)
{
    cal_held_here++;
    atomic_signal_fence(memory_order_seq_cst);
    if (FC_UNLIKELY(fc_seam.writer_step != 0))
        fc_seam.writer_step("lock-try"); /* (a test forks here, from a "handler") */
    int won = fc_track_trylock(&fc_global_track);
    atomic_signal_fence(memory_order_seq_cst);
    if (!won)
        cal_held_here--;
    return won;
}

void fc_cal_unlock(void)
{
    fc_track_unlock(&fc_global_track);
    atomic_signal_fence(memory_order_seq_cst);
    cal_held_here--;
}

int fc_cal_held_here(void) { return cal_held_here; }

/* How far readers may have used a line: its soft span, or the span it had
 * before it was cut short (uncut_span). */
static uint64_t meta_end_span(const struct fc_meta *m)
{
    return m->uncut_span > m->soft_span ? m->uncut_span : m->soft_span;
}

/* The global line is read inline unless a counter is injected (the slow
 * path reads it) or the kernel's clock answers every fine read
 * (FC_READ_KERNEL, written before the first line): then every line of it
 * has fast_span 0, so no read is served from it before its route is seen. */
static int slow_path_only(const struct fc_track *t)
{
    return t->cpu < 0 && (fc_seam.counter || (t->latch->read_flags & FC_READ_KERNEL));
}

/* A line's rate, ns per tick. */
static double line_rate(const struct fc_line *l)
{
    return (double)l->mult / (double)((int64_t)1 << FC_SHIFT);
}

/* A reader's speculation window around its counter read, in ticks. */
static uint64_t past_ticks(double rate)
{
    return (uint64_t)(FC_PAST_MARGIN_NS / rate) + 1;
}

/* cur again, with these spans: its end and how far readers may have used it. */
static void publish_spans(struct fc_latch *latch, const struct fc_line *cur, const struct fc_meta *cm, uint64_t span,
                          uint64_t uncut)
{
    struct fc_line l = *cur;
    struct fc_meta m = *cm;
    m.uncut_span = uncut;
    m.soft_span = span;
    if (l.fast_span > span)
        l.fast_span = span;
    fc_line_publish(latch, &l, fc_line_base_frac(cur), &m);
}

/* Republish `cur` with its end cut to `span` (readers beyond it take the
 * slow path), remembering how far it reached before: its old end, where
 * readers of the uncut line may hold values up to it, or the cut itself
 * where it `ended` there (nothing past it was read, so the next line need
 * not start above the old one's uncut end). */
static void publish_cut(struct fc_latch *latch, const struct fc_line *cur, const struct fc_meta *cm, uint64_t span,
                        int ended)
{
    publish_spans(latch, cur, cm, span, ended ? span : meta_end_span(cm));
}

/* The published line again, readers' use of it bounded at `uncut` ticks
 * from its base (never below its cut): what a fallback past its cut holds at. */
static void publish_uncut_end(struct fc_latch *latch, uint64_t uncut)
{
    const struct fc_meta *cm = fc_meta_current(latch);
    publish_spans(latch, fc_line_current(latch), cm, cm->soft_span, uncut > cm->soft_span ? uncut : cm->soft_span);
}

static int64_t child_ceiling(void);

/*
 * A fork child.  A calibration on this very thread (fork from a signal
 * handler that interrupted it) goes on when the handler returns: its lock
 * and its state stay.  One on another thread is gone: free its lock and
 * end its publication (fallbacks would wait on it).  A line it had cut
 * short stays cut (fallbacks past the cut may have returned kernel values
 * above the old line there); the child's first line starts at or above the
 * uncut end instead (build_and_publish, F).  The lock names its holder, so
 * a handler that forked between this thread's count and its try-lock,
 * while another thread held the lock, leaves it free in the child too.
 */
int fc_cal_reset_in_child(int64_t *floor_ns)
{
    if (publishing_here)
        return 0; /* this thread's writer, inside its publication: it goes on */
    uint64_t gone = atomic_load_explicit(&fallback.publishing, memory_order_relaxed);
    int lost_switch = 0;
    if (gone == PUBLISHING_A_SWITCH) {
        /* A switch off the global line that is gone: its hold is lowered
         * and the ceiling taken again (the same: the hold kept fallbacks at
         * it), for the caller to finish the switch on. */
        int64_t v = child_ceiling(), noted = atomic_load_explicit(&fallback.noted, memory_order_relaxed);
        *floor_ns = v > noted ? v : noted;
        lost_switch = 1;
        atomic_store_explicit(&fallback.publishing, 0, memory_order_relaxed);
    } else if (gone) {
        /* A writer that is gone, inside its publication: if its new line is
         * visible, old-line reads made before it showed may lie past that
         * line's end.  The child's first line starts at or above this
         * line's value now (F), which covers them (the pivot rule).  (Not
         * visible yet: the old line stands as it was.) */
        atomic_store_explicit(&fallback.publishing, 0, memory_order_relaxed);
        const struct fc_line *cur = fc_line_current(&fc_latch);
        struct fc_meta m = *fc_meta_current(&fc_latch);
        if (m.epoch == gone && cur->mult > 0) {
            double rate = line_rate(cur);
            uint64_t used = fc_now_counter(1) + past_ticks(rate) - cur->base_tsc;
            if ((int64_t)used > 0 && used > meta_end_span(&m)) {
                m.uncut_span = used;
                fc_line_publish(&fc_latch, cur, fc_line_base_frac(cur), &m);
            }
        }
    }
    fc_track_free_in_child(fc_global_track.lock, fc_global_track.cs);
    return lost_switch;
}

static int64_t abs64(int64_t v) { return v < 0 ? -v : v; }
/* fabs and llround without libm (the library depends on libc and pthreads only). */
static double fc_fabs(double x) { return x < 0 ? -x : x; }
static int64_t round64(double x) { return (int64_t)(x < 0 ? x - 0.5 : x + 0.5); }
static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

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

/*
 * BOOTTIME - MONOTONIC is one constant in the kernel (offs_boot), changed
 * only by a suspend, which adds to it.  A sample brackets it within a few
 * ns; a midpoint per sample put each line (and each CPU's line) a few ns
 * apart, so BOOTTIME stepped back at a new line or a migration although
 * MONOTONIC did not.  Every line carries the one value kept here instead:
 * the first bracket's midpoint, kept while later brackets do not lie wholly
 * above it (a suspend), and never lowered -- a bracket wholly below it can
 * only come from its own first bracket's width, a few ns of error, where
 * lowering it would step BOOTTIME back.  Several per-CPU calibrations may
 * sample at once: a CAS raises it.  Reset at each decision (fc_cal_begin).
 */
#define BOOT_OFFSET_NONE INT64_MIN
static _Atomic int64_t boot_offset_kept = BOOT_OFFSET_NONE;

static int64_t boot_offset_in(int64_t lo, int64_t hi)
{
    int64_t kept = atomic_load_explicit(&boot_offset_kept, memory_order_relaxed);
    int64_t mid = lo + (hi - lo) / 2;
    while (kept == BOOT_OFFSET_NONE || kept < lo) {
        if (atomic_compare_exchange_weak_explicit(&boot_offset_kept, &kept, mid, memory_order_relaxed,
                                                  memory_order_relaxed))
            return mid;
    }
    return kept;
}

int64_t fc_cal_boot_offset(int64_t otherwise)
{
    int64_t kept = atomic_load_explicit(&boot_offset_kept, memory_order_relaxed);
    return kept == BOOT_OFFSET_NONE ? otherwise : kept;
}

/* Samples in a row without a usable MONOTONIC_RAW bracket: after 16, RAW
 * is tried at one sample in 256 only (any writer may count: a miss more or
 * less only moves the moment it is tried). */
#define RAW_MISSES_MAX 16
static _Atomic unsigned raw_misses;

/* One counter read for a sample: ordered on any CPU, or rdtscp on `cpu`. */
static uint64_t sample_counter(int cpu, int *on_cpu)
{
    if (cpu < 0) {
        *on_cpu = 1;
        return fc_now_counter(1);
    }
    uint32_t aux;
    uint64_t t = fc_now_counter_aux(&aux);
    *on_cpu = FC_AUX_CPU(aux) == cpu;
    return t;
}

/* One read of the kernel's clock `id` between two counter reads, both on
 * `cpu` (sample_counter): 1, with the counter at either side; 0 if either
 * read was not on `cpu`; -1 if the kernel's clock could not be read. */
static int bracket_kernel(int cpu, clockid_t id, uint64_t *t0, struct timespec *ts, uint64_t *t1)
{
    int on0, on1;
    *t0 = sample_counter(cpu, &on0);
    if (fc_kernel_gettime(id, ts) != 0) {
        *t1 = *t0;
        return -1;
    }
    *t1 = sample_counter(cpu, &on1);
    return on0 && on1;
}

static int sample_kernel(struct fc_sample *s, int tries, int cpu);

int fc_cal_sample(struct fc_sample *s, int tries, int cpu)
{
    /* A refused clock (seccomp without a vDSO: the raw system call sets
     * errno) must not show through the successful read that sampled. */
    int saved = errno;
    int r = sample_kernel(s, tries, cpu);
    errno = saved;
    return r;
}

static int sample_kernel(struct fc_sample *s, int tries, int cpu)
{
    uint64_t best = UINT64_MAX;
    int migrated = 0;
    memset(s, 0, sizeof *s);
    for (int i = 0; i < tries; i++) {
        struct timespec ts;
        uint64_t t0, t1;
        int r = bracket_kernel(cpu, CLOCK_MONOTONIC, &t0, &ts, &t1);
        if (r < 0)
            return FC_SAMPLE_ERROR;
        if (r == 0) {
            migrated++;
            continue;
        }
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
    if (best == UINT64_MAX)
        return migrated ? FC_SAMPLE_MIGRATED : FC_SAMPLE_NOISY;

    /* MONOTONIC_RAW the same way (update_rate, warp_note: was it the kernel
     * or the counter that moved?): the first of up to three brackets no
     * wider than a few MONOTONIC ones, else none -- a wide bracket would
     * excuse any change.  Where RAW gives none 16 times in a row (not in
     * the vDSO: a system call each time, or a busy machine), it is tried at
     * one sample in 256 from then on; without it those questions are
     * answered as before. */
    unsigned misses = atomic_load_explicit(&raw_misses, memory_order_relaxed);
    if (misses >= RAW_MISSES_MAX && misses % 256 != 0) {
        atomic_store_explicit(&raw_misses, misses + 1, memory_order_relaxed);
    } else {
        const uint64_t limit = 4 * best + 2 * fc_counter_step() + 16;
        for (int i = 0; i < 3 && !s->raw_ok; i++) {
            struct timespec ts;
            uint64_t t0, t1;
            int r = bracket_kernel(cpu, CLOCK_MONOTONIC_RAW, &t0, &ts, &t1);
            if (r < 0)
                break;
            if (r == 0 || t1 < t0 || t1 - t0 > limit)
                continue;
            s->raw_t = t0 + (t1 - t0) / 2;
            s->raw_width = t1 - t0;
            s->raw = fc_ts_to_ns(&ts);
            s->raw_ok = 1;
        }
        atomic_store_explicit(&raw_misses, s->raw_ok ? 0 : misses + 1, memory_order_relaxed);
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
    /* A failed BOOTTIME read keeps the offset known so far: 0 would step
     * BOOTTIME back by the time spent suspended. */
    s->boot_off = boot_ok ? boot_offset_in(blo, bhi) : fc_cal_boot_offset(0);
    s->offsets_ok = 1;
    return FC_SAMPLE_OK;
}

/*
 * The kernel's MONOTONIC runs at (tick x USER_HZ x 1000 + frequency) ns per
 * second of its clocksource (kernel/time/ntp.c, second_length), so when
 * adjtimex changes them the rate per counter tick changes by their ratio:
 * scale the kept rate by it at once, rather than keep the old rate until two
 * new samples measure the new one (up to ~50 us of error after a 1000 ppm
 * step, measured).  The uncertainty stays at three times the change, as
 * margin (an overshoot once measured after a tick change was our own rate
 * error: see sync.c, fc_sync_unseen_rate).
 */
static void rescale_for_settings(struct fc_cal_state *cs)
{
    long freq, tick;
    if (!fc_sync_settings(&freq, &tick))
        return;
    if (cs->settings_known) {
        double before = (double)cs->set_tick * 1e5 + (double)cs->set_freq / 65536.0 * 1e3;
        double after = (double)tick * 1e5 + (double)freq / 65536.0 * 1e3;
        if (before > 0 && after > 0)
            cs->rate *= after / before;
    }
    cs->settings_known = 1;
    cs->set_freq = freq;
    cs->set_tick = tick;
}

/* How unsure the rate is after the kernel's rate changed by `change`
 * (relative), rescaled or not: three times the change, as margin (above),
 * plus 100 ppm for the ticks over which the kernel applies it. */
static double unc_after_change(double change)
{
    return 3.0 * change + 1e-4;
}

static void widen_for_change(struct fc_cal_state *cs, double change)
{
    double unc = unc_after_change(change);
    if (cs->rate_unc < unc)
        cs->rate_unc = unc;
}

/* The adjtimex tick the track's rate was measured or rescaled under (0:
 * not known): what unseen tick changes are charged from (sync.c). */
static long rate_tick(const struct fc_cal_state *cs)
{
    return cs->settings_known ? cs->set_tick : 0;
}

/* ------------------------------------------------------------------ lines */

static __int128 line_fixed(const struct fc_line *l, int64_t d)
{
    return fc_line_eval_fixed(l, d);
}

static int64_t fixed_to_ns(__int128 v) { return (int64_t)(v >> FC_SHIFT); }
static __int128 ns_to_fixed(int64_t ns) { return (__int128)ns << FC_SHIFT; }

/* The bound without the exposure to rate changes since the line's last
 * look at the kernel: what it is right after a look that found it within. */
static int64_t meta_bound_seen(const struct fc_meta *m, int64_t mono_now)
{
    int64_t age = mono_now - m->published_mono_ns;
    if (age < 0)
        age = 0;
    return m->error_bound_ns + (int64_t)((double)age * (double)m->bound_growth_ppb * 1e-9);
}

int64_t fc_meta_bound(const struct fc_meta *m, int64_t mono_now)
{
    return meta_bound_seen(m, mono_now) + fc_sync_exposure_ns(m->checked_mono_ns, m->tick_us, mono_now);
}

/*
 * With the lock held, before leaving the global line: an upper bound on
 * every value it has returned or will return.  A reader that read the line
 * (its counter) before the replacement becomes visible may still return a
 * value from it, and the writer cannot know when that is -- it may be
 * preempted before publishing.  So first fence the line: republish it with
 * its end cut to a point shortly ahead, and take the line's value at the
 * later of that cut and the moment the cut was surely visible (the counter
 * after publishing, plus a reader's speculation window): a writer
 * preempted before its publication showed let readers of the uncut line go
 * past the cut meanwhile.  (Cutting again further ahead, as this once did,
 * capped the second cut at the first: the ceiling came back below values
 * such readers returned.)  Never beyond the uncut line's own end.
 */
#define FC_FENCE_NS 100000.0 /* the cut: 100 us ahead */

/* Just published, to show at `cut`: the later of that and where it surely
 * showed (the counter now, plus a reader's speculation window: a writer
 * preempted before it showed let readers go past `cut`), within `end`. */
static uint64_t surely_seen(uint64_t cut, uint64_t end, double rate)
{
    uint64_t seen = fc_now_counter(1) + past_ticks(rate);
    if ((int64_t)(seen - cut) > 0)
        cut = seen;
    return (int64_t)(cut - end) > 0 ? end : cut;
}
/* The global line's part of the ceiling, fenced (above). */
static int64_t line_ceiling(void)
{
    const struct fc_line *cur = fc_line_current(&fc_latch);
    const struct fc_meta *cm = fc_meta_current(&fc_latch);
    if (cur->mult == 0)
        return cm->floor_ns;
    /* Readers may have used the line up to its uncut end (a cut left by a
     * writer gone in a fork), and fallbacks returned values past its end
     * while a line was being published: the ceiling is above both. */
    const uint64_t end = cur->base_tsc + meta_end_span(cm); /* readers of the uncut line may hold it */
    int64_t v;
    if ((int64_t)(fc_now_counter(1) - cur->base_tsc) < 0) {
        /* The counter is behind the line's base: "now" means nothing; but
         * then no reader has used the line since the counter went back, and
         * before that the line was within its bound of the kernel. */
        v = fixed_to_ns(line_fixed(cur, (int64_t)(end - cur->base_tsc))) + 1;
        int64_t k = fc_kernel_ns(CLOCK_MONOTONIC);
        int64_t cap = k + fc_meta_bound(cm, k) + 1;
        if (k != 0 && v > cap) /* k 0: unreadable, no cap (the line's end stands) */
            v = cap;
    } else {
        const struct fc_line old = *cur; /* the slot is republished below */
        double rate = line_rate(&old);
        uint64_t cut = fc_now_counter(1) + (uint64_t)(FC_FENCE_NS / rate);
        if (cut - old.base_tsc < cm->soft_span) {
            if (fc_seam.writer_step)
                fc_seam.writer_step("fence-chosen");
            publish_cut(&fc_latch, &old, cm, cut - old.base_tsc, 0);
            cut = surely_seen(cut, end, rate);
            if (fc_seam.writer_step)
                fc_seam.writer_step("fenced");
            /* A fallback past the cut holds at the line's value up to the
             * uncut end (clock.c fallback_read): past this ceiling for one
             * made after `seen`, and the next mode's floor takes no note of
             * it.  So the uncut end is brought down to here; a fallback
             * made before that showed read a counter below the next look. */
            publish_uncut_end(&fc_latch, cut - old.base_tsc);
            cut = surely_seen(cut, end, rate);
            if (fc_seam.writer_step)
                fc_seam.writer_step("fence-looked");
        } else {
            cut = end; /* the line ends sooner anyway */
        }
        v = fixed_to_ns(line_fixed(&old, (int64_t)(cut - old.base_tsc))) + 1;
    }
    return v > cm->floor_ns ? v : cm->floor_ns;
}

/* In a fork child, for a switch whose thread is gone: the line's value
 * where the counter is now, plus a reader's speculation window, within
 * the uncut end -- no read before the fork went further (fallbacks, which
 * may return the kernel's value, are in fallback.noted).  Not
 * line_ceiling's fence: where the gone thread had cut the line, it gives
 * the uncut end, up to a span ahead of every read, and the child's clock
 * would stand there. */
static int64_t child_ceiling(void)
{
    const struct fc_line *cur = fc_line_current(&fc_latch);
    const struct fc_meta *cm = fc_meta_current(&fc_latch);
    if (cur->mult == 0 || (int64_t)(fc_now_counter(1) - cur->base_tsc) < 0)
        return line_ceiling(); /* no line, or the counter behind it: no fence there */
    const uint64_t end = cur->base_tsc + meta_end_span(cm);
    uint64_t at = surely_seen(fc_now_counter(1), end, line_rate(cur));
    int64_t v = fixed_to_ns(line_fixed(cur, (int64_t)(at - cur->base_tsc))) + 1;
    return v > cm->floor_ns ? v : cm->floor_ns;
}

int64_t fc_cal_global_ceiling(void)
{
    /* A fallback made from here on sees `publishing` and returns at most
     * its line's value at the cut (fc_cal_fallback_value); one that did
     * not see it noted its value first, and that is read below (Dekker).
     * Without the hold, a fallback past the line's end returned the
     * kernel's time, above the ceiling, until the next mode showed. */
    raise_publishing(PUBLISHING_A_SWITCH);
    int64_t v = line_ceiling();
    /* Every value a fallback meant to return before it saw the hold (at
     * least all that any returned), including ones past the line's end. */
    int64_t noted = atomic_load_explicit(&fallback.noted, memory_order_seq_cst);
    return v > noted ? v : noted;
}

void fc_cal_global_ceiling_done(void)
{
    lower_publishing();
}

/* A line no read is served from (fast span 0): a floor, and the offsets of
 * `offsets` (none: all 0). */
static void publish_no_line(int64_t floor_ns, const struct fc_line *offsets)
{
    struct fc_line l;
    struct fc_meta m;
    memset(&l, 0, sizeof l);
    memset(&m, 0, sizeof m);
    if (offsets) {
        l.real_offset = offsets->real_offset;
        l.boot_offset = offsets->boot_offset;
        l.tai_offset = offsets->tai_offset;
    }
    m.floor_ns = floor_ns;
    m.epoch = fc_meta_current(&fc_latch)->epoch + 1;
    fc_line_publish(&fc_latch, &l, 0, &m);
}

void fc_cal_publish_system(int64_t floor_ns)
{
    publish_no_line(floor_ns, fc_line_current(&fc_latch));
}

void fc_cal_forget_timeline(void)
{
    atomic_store_explicit(&fallback.noted, 0, memory_order_relaxed);
    atomic_store_explicit(&fallback.returned, 0, memory_order_relaxed);
    atomic_store_explicit(&boot_offset_kept, BOOT_OFFSET_NONE, memory_order_relaxed);
    /* No floor and no offsets -- the BOOTTIME offset too, which a fallback
     * holds BOOTTIME above (the child's namespace may set BOOTTIME below
     * the parent's suspended time). */
    publish_no_line(0, 0);
}

/* Why the global track failed (calibration's word for mode.c, which decides
 * what follows: written under the lock, read by its holder). */
static char failure_reason[256];

static int global_failed(const char *reason)
{
    struct fc_buf b;
    fc_buf_init(&b, failure_reason, sizeof failure_reason);
    fc_buf_str(&b, reason);
    return FC_RECAL_FAILED;
}

const char *fc_cal_failure_reason(void)
{
    return failure_reason;
}

void fc_cal_set_ticks_rate(double rate)
{
    atomic_store_explicit(&ticks_mult, round64(rate * (double)((int64_t)1 << FC_SHIFT)), memory_order_relaxed);
}

/* Sample noise in ns: half the bracket, widened by the counter's step (a
 * coarse counter's reads may each lag their instant by up to a step), plus
 * the kernel's own resolution. */
static double sigma_ns(const struct fc_sample *s, double rate)
{
    return ((double)s->width + (double)fc_counter_step()) * rate * 0.5 + 1.0;
}

static void history_push(struct fc_cal_state *cs, const struct fc_sample *s)
{
    if (cs->n == FC_HIST) {
        memmove(&cs->hist[0], &cs->hist[1], (FC_HIST - 1) * sizeof cs->hist[0]);
        cs->n--;
    }
    cs->hist[cs->n++] = *s;
}

/* How far v2 (at counter t2) lies off the straight line through (t0, v0)
 * and (t1, v1), extended: update_rate's test of the newest sample against
 * the history, on MONOTONIC or on RAW.  *slope (if asked): that line's, per
 * tick. */
static double misfit(uint64_t t0, int64_t v0, uint64_t t1, int64_t v1, uint64_t t2, int64_t v2, double *slope)
{
    double k = (double)(v1 - v0) / (double)(int64_t)(t1 - t0);
    if (slope)
        *slope = k;
    return (double)v2 - ((double)v1 + k * (double)(int64_t)(t2 - t1));
}

/* Whether, over first -> prev -> last, the counter kept its rate against
 * MONOTONIC_RAW, which no adjtimex setting moves: 1 yes, 0 no, -1 cannot
 * tell (a sample without RAW, or RAW's own noise not well below the
 * MONOTONIC misfit it is to explain). */
static int counter_kept_raw_rate(const struct fc_sample *first, const struct fc_sample *prev,
                                 const struct fc_sample *last, double mono_residual)
{
    if (!first->raw_ok || !prev->raw_ok || !last->raw_ok || (int64_t)(prev->raw_t - first->raw_t) <= 0)
        return -1;
    double r_raw;
    double residual = misfit(first->raw_t, first->raw, prev->raw_t, prev->raw, last->raw_t, last->raw, &r_raw);
    /* As update_rate's tolerance, in RAW ns: sigma per sample, x4, + 5. */
    double step = (double)fc_counter_step();
    double tol = 4.0 * (((double)(first->raw_width + prev->raw_width + last->raw_width) + 3.0 * step) * r_raw * 0.5 +
                        3.0) + 5.0;
    if (4.0 * tol > fc_fabs(mono_residual))
        return -1;
    return fc_fabs(residual) <= tol;
}

/* The rate was just measured anew (not kept).  Where adjtimex is refused
 * now, it is under settings nobody saw (a tick changed since the last
 * answer shows only in the samples), so the tick that answer gave is no
 * longer its: rate_tick 0, unseen changes charged from either end
 * (sync.c), and a later change of settings records them without
 * rescaling the rate for a change it already holds. */
static void rate_measured_now(struct fc_cal_state *cs)
{
    long freq, tick;
    if (!fc_sync_settings(&freq, &tick)) {
        cs->settings_known = 0;
    } else if (!cs->settings_known) {
        /* Answered again (or for the first time since the track began): the
         * rate just measured is under what it says.  Otherwise only a change
         * of settings (rescale_for_settings) would record them, and the
         * track would be charged from either end until one came. */
        cs->settings_known = 1;
        cs->set_freq = freq;
        cs->set_tick = tick;
    }
}

/* Slope of the history; restarts it when the newest sample does not fit.
 * Returns 0 if it did not restart; 1 if it did, with the slope across the
 * misfit as the rate; 2 if it did, but the counter kept its rate against
 * MONOTONIC_RAW: the kernel's rate moved and came back between two polls
 * (a daemon's tick or frequency, changed and undone while nobody read),
 * so the rate under the settings seen now -- the kept one -- still holds;
 * 3 as 1, and RAW says the counter itself changed its rate.  Where it
 * restarts, *misfit_ns is the newest sample's misfit. */
static int update_rate(struct fc_cal_state *cs, double *misfit_ns)
{
    if (cs->n < 2)
        return 0;
    const struct fc_sample *last = &cs->hist[cs->n - 1], *prev = &cs->hist[cs->n - 2];
    const double r = cs->rate;
    if (cs->n >= 3) {
        const struct fc_sample *first = &cs->hist[0];
        double residual = misfit(first->t, first->mono, prev->t, prev->mono, last->t, last->mono, 0);
        double tol = 4.0 * (sigma_ns(last, r) + sigma_ns(prev, r) + sigma_ns(first, r)) + 5.0;
        if (fc_fabs(residual) > tol) {
            /* The kernel's rate changed somewhere since the previous sample.
             * Restart the history from here so intervals ramp up again from
             * 100 us, as at start-up, and the new rate is known precisely
             * within ms.  Meanwhile: if the counter kept its rate against
             * RAW, the kernel moved; the last poll saw the kept rate's
             * settings, so that rate stands.  (A poll skipped because
             * another thread was polling may have missed a change that
             * lasts: the kept rate is then off by it until the next poll's
             * rescale, and every line's bound charges that exposure.)
             * Otherwise the slope across the change is the best guess. */
            *misfit_ns = residual;
            int raw_verdict = counter_kept_raw_rate(first, prev, last, residual);
            int kernel_moved = raw_verdict == 1;
            double mixed = (double)(last->mono - prev->mono) / (double)(last->t - prev->t);
            cs->hist[0] = *last;
            cs->n = 1;
            if (raw_verdict == 0) {
                /* RAW says the counter itself changed: a step of it (a VM's
                 * TSC offset moved) or a new rate, which one gap cannot tell
                 * apart -- the slope across it may be far from either.  Keep
                 * the rate, uncertain by as much as that slope differs: the
                 * bound covers both, the span shrinks with it, and the
                 * samples that follow measure the rate (jump_ref). */
                double change = fc_fabs(mixed / cs->rate - 1.0);
                if (cs->rate_unc < change)
                    cs->rate_unc = change;
            } else if (!kernel_moved) {
                /* RAW cannot tell (none, refused, or the misfit too small
                 * for it): the slope across the change is the best guess,
                 * uncertain by as much as it moved from the kept rate -- a
                 * tick changed and undone between two samples leaves a
                 * blend of rates up to ~10% apart, which 1e-3 would not
                 * cover for the exposure charged from it (sync.c). */
                double change = fc_fabs(mixed / cs->rate - 1.0);
                if (cs->rate_unc < change)
                    cs->rate_unc = change;
                cs->rate = mixed;
                rate_measured_now(cs);
            }
            if (cs->rate_unc < 1e-3)
                cs->rate_unc = 1e-3;
            atomic_fetch_add_explicit(&stats.rate_resets, 1, memory_order_relaxed);
            return kernel_moved ? 2 : raw_verdict == 0 ? 3 : 1;
        }
    }
    const struct fc_sample *first = &cs->hist[0];
    double span = (double)(last->t - first->t);
    double est = (double)(last->mono - first->mono) / span;
    double unc = (sigma_ns(first, r) + sigma_ns(last, r)) / (span * est);
    /* A CPUID seed may beat a short baseline: keep whichever is better
     * known, unless the two disagree (then the seed was wrong). */
    if (unc < cs->rate_unc || fc_fabs(est / cs->rate - 1.0) > 3.0 * (unc + cs->rate_unc)) {
        cs->rate = est;
        cs->rate_unc = unc;
        rate_measured_now(cs);
    }
    return 0;
}

/* How the next line relates to the current one. */
enum build_kind {
    BUILD_CONTINUE,  /* the normal case */
    BUILD_FIRST,     /* no line was ever used */
    BUILD_RESUMED,   /* after a suspend: every read of the old line came before it */
};

/* Build the next line of track t from sample s and publish it. */
static void build_and_publish(const struct fc_track *t, const struct fc_sample *s, enum build_kind kind)
{
    struct fc_cal_state *cs = t->cs;
    const int restart = kind != BUILD_CONTINUE;
    const double rate = cs->rate;
    const int64_t mult_k = round64(rate * (double)((int64_t)1 << FC_SHIFT));
    /* The old line as it was: copies, since cutting it at a pivot (below)
     * publishes into the slot that will hold the next line. */
    const struct fc_line cur_line = *fc_line_current(t->latch);
    const struct fc_meta cur_meta = *fc_meta_current(t->latch);
    const struct fc_line *cur = &cur_line;
    const struct fc_meta *cm = &cur_meta;
    const int has_line = cur->mult != 0;
    const uint64_t old_epoch = cm->epoch; /* kept by its cuts */
    const double allowance = fc_sync_rate_allowance();

    /* Interval: the baseline so far, between 100 us and the maximum (10 ms
     * while NTP may change the kernel's rate). */
    int64_t baseline_ns = cs->n >= 2 ? (int64_t)((double)(cs->hist[cs->n - 1].t - cs->hist[0].t) * rate) : 0;
    int64_t max_iv = fc_cal_max_interval_ns;
    if (allowance > 0 && max_iv > FC_STEERING_INTERVAL_NS)
        max_iv = FC_STEERING_INTERVAL_NS;
    int64_t interval = clamp64(baseline_ns, FC_MIN_INTERVAL_NS, max_iv);
    cs->interval_ns = interval;

    /* Span: how long readers may use the line.  The thread refreshes it
     * every interval (with slack for scheduling delays unless NTP steers);
     * past soft_span a reader recalibrates or asks the kernel.  It is cut
     * so that the rate's uncertainty cannot grow the error past the target. */
    double unc = cs->rate_unc > 1e-12 ? cs->rate_unc : 1e-12;
    int thread = fc_upkeep_running();
    double soft_ns = thread ? 2.0 * (double)interval + (allowance > 0 ? 0 : 20e6) : (double)interval;
    if (soft_ns > FC_TARGET_ERR_NS / unc) soft_ns = FC_TARGET_ERR_NS / unc;
    if (soft_ns < (double)interval) soft_ns = (double)interval;

    const int64_t past = (int64_t)past_ticks(rate);
    /* Remaining error is slewed away by the next calibration (deadbeat):
     * noise cannot build up, and a real error is gone within one interval
     * unless the 500 ppm limit makes it take longer. */
    double horizon_ns = (double)interval;

    struct fc_line l;
    struct fc_meta m;
    uint64_t base_frac = 0;
    int64_t err_at_pivot_ns = 0;
    int64_t measured_err = 0;
    int measured = 0;

    if (fc_seam.writer_step && t->cpu < 0)
        fc_seam.writer_step("build");
    int continue_old = 0;
    uint64_t cut_span = cm->soft_span; /* the visible old line's, once cut (never lengthened) */
    uint64_t covered_to = 0;           /* the final attempt's now (see fallback.covered_to) */
    int below_old = 0;                 /* the new line may start below the old line's end */
    for (int attempt = 0;; attempt++) {
        const uint64_t now = t->cpu < 0 ? fc_now_counter(1) : s->t + s->width;
        uint64_t P = now - (uint64_t)past;
        covered_to = now;
        /* Still in use?  Then continue it exactly.  If not, it was never
         * read past its end (F) and readers since had the kernel's values.
         * After a resume (or a restart after failures) the global line may
         * still be in use too, whatever the counter did meanwhile (one that
         * stopped leaves it in its span however long the suspend):
         * readers go on reading it until the new one shows, so it is
         * continued the same way (a shallower new line meets it at a pivot
         * ahead, the old one cut there), never started below what they may
         * read meanwhile.  The span says whether it can still be read. */
        int in_use = kind == BUILD_CONTINUE || (kind == BUILD_RESUMED && t->cpu < 0);
        int valid = has_line && in_use && (uint64_t)(now - cur->base_tsc) < cm->soft_span;
        uint64_t F = 0;
        if (!valid && has_line && kind != BUILD_FIRST) {
            /* A line left cut by a writer that is gone (a fork child) may
             * have been read up to its uncut end before the cut showed. */
            int64_t used = (int64_t)(now - cur->base_tsc);
            uint64_t end = meta_end_span(cm);
            F = cur->base_tsc + (used < 0 ? end : ((uint64_t)used < end ? (uint64_t)used : end));
            /* Start the new line no earlier than F, so "at or above what the
             * old line returned" is checked where both lines are evaluated.
             * Not where the counter is behind the old line (one reset by S3,
             * a CPU's after a resume): F is then the old line's end, its
             * value the floor below, and a new line starting there would
             * start ahead of the counter, unreadable until it got there. */
            if (used >= 0 && (int64_t)(F - P) > 0)
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
                if (kind == BUILD_RESUMED && cs->resume_lapsed) {
                    /* It lapsed before the resume, so its reads all came before
                     * the suspend, when it was within its bound of a kernel time
                     * that has not run backwards.  (A line still in use after a
                     * short suspend may have given readers values ahead by the
                     * suspend's length: those stand, and are slewed away.) */
                    __int128 cap = kp + ns_to_fixed(fc_meta_bound(cm, s->mono) + 1);
                    if (cap < floor) {
                        floor = cap;
                        below_old = 1; /* not above the old line's end: no covered_to */
                    }
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

        if (valid && !jumped && mult < cur->mult && continue_old) {
            /* The pivot kept passing before we could publish (a preempted
             * writer): continue the old line exactly; the next calibration
             * corrects it.  Publishing the shallower line now would put it
             * below values the old line already gave. */
            mult = cur->mult;
        } else if (valid && !jumped && mult < cur->mult) {
            /* Shallower than the old line: meet it at a pivot after the
             * publication, so no reader of the old line sees a later time. */
            double rel = (double)(cur->mult - mult) / (double)cur->mult;
            double ahead_ns = 5.0 / (rel > 1e-15 ? rel : 1e-15);
            if (ahead_ns < 200e3) ahead_ns = 200e3; /* beyond a short preemption of the writer */
            if (ahead_ns > 10e6) ahead_ns = 10e6;
            pivot = now + (uint64_t)(ahead_ns / rate);
            base = line_fixed(cur, (int64_t)(pivot - cur->base_tsc));
            e = base - KFIX(pivot);
            mult = mult_k - (int64_t)(e / h_ticks);
            if (mult > cur->mult)
                mult = cur->mult;
            err_at_pivot_ns = fixed_to_ns(e);
        }
        /* Where the old line must end before readers can see the new one
         * (0: nowhere): a future pivot; or, after a step forward onto a
         * shallower slope, where the old line catches up with the new one
         * (after three misses the step keeps the old slope: never caught). */
        uint64_t guard = pivot != P ? pivot : 0;
        if (valid && jumped && mult < cur->mult) {
            if (continue_old) {
                mult = cur->mult;
            } else {
                __int128 lead = base - line_fixed(cur, (int64_t)(P - cur->base_tsc));
                __int128 ticks = lead / (cur->mult - mult);
                guard = P + (uint64_t)(ticks < (__int128)cm->soft_span ? ticks : (__int128)cm->soft_span);
            }
        }
#undef KFIX
        /* Store the line at P (<= publication) so readers' deltas are >= 0. */
        __int128 base_p = base - (__int128)mult * (int64_t)(pivot - P);
        memset(&l, 0, sizeof l);
        memset(&m, 0, sizeof m);
        l.base_tsc = P;
        l.mult = mult;
        l.base_ns = (int64_t)(base_p >> FC_SHIFT);
        base_frac = (uint64_t)(base_p - ((__int128)l.base_ns << FC_SHIFT));
        m.soft_span = (uint64_t)(soft_ns / rate) + (uint64_t)past;
        /* Per-CPU lines are read by percpu.c, which checks fast_span too.
         * Without the thread, the fast span ends at the next adjtimex poll:
         * the reader who gets there polls (fc_track_poll). */
        l.fast_span = slow_path_only(t) ? 0 : m.soft_span;
        if (l.fast_span > (uint64_t)past + (uint64_t)(FC_READER_POLL_NS / rate))
            l.fast_span = (uint64_t)past + (uint64_t)(FC_READER_POLL_NS / rate);
        if (s->offsets_ok) {
            l.real_offset = s->real_off;
            l.boot_offset = s->boot_off;
            l.tai_offset = s->real_off + (s->tai_ok ? s->tai_off : 0);
        } else {
            l.real_offset = cur->real_offset;
            l.boot_offset = cur->boot_offset;
            l.tai_offset = cur->tai_offset;
        }
        /* Against the prediction the line is off by err_at_pivot at the
         * pivot, but a pivot in the future is reached along a slope that is
         * not the prediction's: until then the error runs from its value at
         * the base (publication) to the pivot's -- the larger of the two
         * ends, both being straight lines.  After the pivot the slew only
         * shrinks it within the line's span. */
        double err_ns = fc_fabs((double)err_at_pivot_ns), err_base_ns = fc_fabs((double)fixed_to_ns(base_p - kp));
        if (err_base_ns > err_ns)
            err_ns = err_base_ns;
        m.error_bound_ns = (int64_t)(err_ns + 2.0 * sigma_ns(s, rate) + 2.0) + 1;
        m.bound_growth_ppb = (int64_t)((unc + allowance + FC_UNSEEN_RATE) * 1e9) + 1;
        m.epoch = cm->epoch + 1;
        m.published_mono_ns = s->mono;
        m.checked_mono_ns = s->mono; /* fitted to the kernel's samples up to here */
        m.tick_us = rate_tick(cs);

        /* The guard must still be ahead when readers can see the new line.
         * A check of the counter before publishing cannot promise that: the
         * writer may be preempted between the two, and readers of the old
         * line read on past the guard, above the new line.  So first cut the
         * old line at the guard (a reader beyond it takes the slow path,
         * which returns no more than the line's value at its end and notes
         * what it returns for the handshake below), then check that the cut
         * showed before the guard.  If it did not, readers may have passed
         * it: try again, and after three misses continue the old line (or
         * keep its slope), which no reader of it can have got ahead of.
         * A cut is never lengthened by a later try: fallback reads past it
         * may have returned kernel values above the old line there, which
         * only the new line is lifted over.  (tsc-percpu's lines need no
         * cut: a thread-local clamp keeps each thread monotonic, and the
         * mode's bound covers steps across them.) */
        if (guard && t->cpu < 0) {
            /* Already past before the cut (the writer was preempted since it
             * read the counter): no cut that readers are past already
             * (fallback_read would then have to hold at values they
             * returned); as after a cut that showed too late, try again. */
            int passed = fc_now_counter(1) + (uint64_t)past >= guard;
            if (!passed) {
                if ((uint64_t)(guard - cur->base_tsc) < cut_span) {
                    if (fc_seam.writer_step)
                        fc_seam.writer_step("cutting");
                    cut_span = guard - cur->base_tsc;
                    publish_cut(t->latch, cur, cm, cut_span, 0);
                }
                if (fc_seam.writer_step)
                    fc_seam.writer_step("cut");
                passed = fc_now_counter(1) + (uint64_t)past >= guard;
            }
            if (passed) {
                if (attempt >= 2)
                    continue_old = 1;
                continue;
            }
        }
        break;
    }

    if (has_line && s->offsets_ok && abs64(s->real_off - cur->real_offset) > 1000 && t->cpu < 0)
        atomic_fetch_add_explicit(&stats.realtime_steps, 1, memory_order_relaxed);
    if (t->cpu < 0) {
        /* Kernel values handed out by fallback reads must not lie above the
         * new line (it is anchored at its sample; its rate may lag a kernel
         * whose rate just changed).  Handshake with fallback_note: either we
         * see a reader's value here, or it sees `publishing` and returns the
         * old line's ceiling instead. */
        if (has_line && !below_old) {
            atomic_store_explicit(&fallback.covered_to, covered_to, memory_order_relaxed);
            atomic_store_explicit(&fallback.covered_epoch, old_epoch, memory_order_relaxed);
        }
        raise_publishing(m.epoch);
        if (fc_seam.writer_step)
            fc_seam.writer_step("publishing");
        int64_t hwm = atomic_load_explicit(&fallback.noted, memory_order_seq_cst);
        /* Evaluated `past` before now, as the pivot rule evaluates P: a
         * reader's unordered counter read may have run that much earlier
         * than the load that showed it this line -- after a fallback read
         * that returned hwm on its own thread. */
        uint64_t at = fc_now_counter(1) - (uint64_t)past;
        __int128 v = (((__int128)l.base_ns << FC_SHIFT) + (__int128)base_frac) + (__int128)l.mult * (int64_t)(at - l.base_tsc);
        if (hwm > 0 && v < ns_to_fixed(hwm) + ns_to_fixed(1)) {
            /* Raise the whole line (a forward step): nothing it returns is
             * below what a fallback read returned. */
            __int128 lift = ns_to_fixed(hwm) + ns_to_fixed(1) - v;
            __int128 b = ((__int128)l.base_ns << FC_SHIFT) + (__int128)base_frac + lift;
            l.base_ns = (int64_t)(b >> FC_SHIFT);
            base_frac = (uint64_t)(b - ((__int128)l.base_ns << FC_SHIFT));
            m.error_bound_ns += fixed_to_ns(lift) + 1;
        }
    }
    fc_line_publish(t->latch, &l, base_frac, &m);
    if (t->cpu < 0) {
        /* Readers of the old line read on until this one showed: at a counter
         * up to `seen`.  Were this line to end before that, the next would
         * start at or above this one's end only, below what they got (a
         * writer preempted before publishing, a short line).  So it ends no
         * sooner; up to there it is at or above the old line (the pivot
         * rule; beyond a future pivot the old line was cut).  Still under
         * `publishing`: a fallback past the unextended end meanwhile takes
         * this line's value at its counter and notes it for the next line
         * (fc_cal_fallback_value).  The bound grows by the slew's drift
         * from the kernel over the extra span. */
        uint64_t seen = fc_now_counter(1) + (uint64_t)past;
        if (fc_seam.writer_step)
            fc_seam.writer_step("seen");
        if ((int64_t)(seen - (l.base_tsc + m.soft_span)) > 0) {
            uint64_t extra = seen - (l.base_tsc + m.soft_span);
            m.soft_span = seen - l.base_tsc;
            m.error_bound_ns += (int64_t)((double)abs64(l.mult - mult_k) * (double)extra /
                                          (double)((int64_t)1 << FC_SHIFT)) + 1;
            fc_line_publish(t->latch, &l, base_frac, &m);
        }
        lower_publishing();
        if (fc_seam.writer_step)
            fc_seam.writer_step("published");
    }
    cs->calibrations++;
    cs->last_ok_mono = s->mono;
    cs->failing_since = 0;

    if (t->cpu < 0) {
        atomic_store_explicit(&ticks_mult, mult_k, memory_order_relaxed);
        atomic_store_explicit(&stats.interval_ns, interval, memory_order_relaxed);
        atomic_store_explicit(&stats.rate, rate, memory_order_relaxed);
    }
    atomic_fetch_add_explicit(&stats.calibrations, 1, memory_order_relaxed);
    if (measured) {
        atomic_store_explicit(&stats.last_err_ns, measured_err, memory_order_relaxed);
        /* A compare-and-swap: per-CPU tracks publish under their own locks,
         * at once, and a plain load and store could lose the larger. */
        atomic_max64(&stats.max_err_ns, abs64(measured_err));
    }
    atomic_store_explicit(&stats.last_width_ns, (int64_t)((double)s->width * rate), memory_order_relaxed);
}

/* ------------------------------------------------------------------ readers' adjtimex polls */

/*
 * The bound charges ~17% of the time since the line's last look at the
 * kernel (sync.c): 85 ms for a lazy line looked at only at its calibrations
 * (up to 0.5 s apart), ~1.7 ms with the thread's 10 ms looks.  So a line's
 * fast span ends one poll interval (1 ms) after its last look; the reader
 * that gets there takes the lock and calls this: a look at the line (a
 * kernel read bracketed by two counter reads, up to three times:
 * look_at_line), one adjtimex poll (two adjtimex calls and prctl's word on
 * seccomp, sync.c; the poll alone 2.4-2.8 us on the AMD guest; ~3.5 us in
 * all in a KVM guest where adjtimex costs 1.6 us: 0.35% of a CPU
 * for a process that reads the clock all the time, nothing for one that
 * does not), then the same line republished with its fast span running to
 * the next poll.  The line's values do not change, so readers on either
 * copy agree.  No line, a line off the kernel beyond its bound (or at its
 * edge, or the kernel unreadable), a change of the kernel's settings, or a
 * line past its soft span wants a recalibration instead: returns 1.
 */
enum look { LOOK_MIGRATED, LOOK_WITHIN, LOOK_OFF, LOOK_UNSURE };

/* Where the line is against the kernel (*k: the kernel's MONOTONIC then):
 * the kernel read bracketed by two counter reads, the line's values at
 * both ends against it.  Within the bound the line has without exposure
 * (the whole bracket: a preempted, wide one proves nothing), its exposure
 * counts from k on (fc_meta_bound); beyond it, or straddling it even with
 * the narrowest of three brackets while narrower than the bound (the line
 * at its bound's edge), or the kernel unreadable, the line is off.  Unsure:
 * every bracket too wide to tell (a busy machine: the exposure keeps
 * growing until a look can tell), outside the line's span, or the counter
 * going back within it. */
static enum look look_at_line(const struct fc_track *t, const struct fc_line *cur, const struct fc_meta *cm,
                              int64_t *k)
{
    uint64_t c0 = 0, c1 = 0;
    struct timespec kts;
    for (int i = 0; i < 3; i++) {
        uint64_t a, z;
        struct timespec ts;
        int on = bracket_kernel(t->cpu, CLOCK_MONOTONIC, &a, &ts, &z);
        if (on == 0)
            return LOOK_MIGRATED; /* the next reader on that CPU looks */
        if (on < 0) {
            *k = 0; /* as fc_kernel_ns; recalibrating says what follows */
            return LOOK_OFF;
        }
        if (z < a)
            continue; /* the counter went back: the next sample says so */
        if (c1 == 0 || z - a < c1 - c0) {
            c0 = a;
            c1 = z;
            kts = ts;
        }
        if ((uint64_t)(c1 - cur->base_tsc) >= cm->soft_span || (int64_t)(c0 - cur->base_tsc) < 0)
            continue;
        *k = fc_ts_to_ns(&kts);
        int64_t b = meta_bound_seen(cm, *k);
        int64_t lo = fixed_to_ns(line_fixed(cur, (int64_t)(c0 - cur->base_tsc))) - *k;
        /* A counter that steps (arm64's, when coarse) may have been up to a
         * step past c1 when the kernel read. */
        int64_t hi = fixed_to_ns(line_fixed(cur, (int64_t)(c1 + fc_counter_step() - cur->base_tsc))) - *k;
        if (hi < -b || lo > b)
            return LOOK_OFF;
        if (lo >= -b && hi <= b)
            return LOOK_WITHIN;
        if (i == 2 && hi - lo <= b)
            return LOOK_OFF; /* at its bound's edge: a fresh line costs less than a growing bound */
    }
    *k = c1 ? fc_ts_to_ns(&kts) : fc_kernel_ns(CLOCK_MONOTONIC);
    return *k ? LOOK_UNSURE : LOOK_OFF; /* 0: the kernel unreadable after all */
}

static int track_poll(const struct fc_track *t)
{
    const struct fc_line *cur = fc_line_current(t->latch);
    const struct fc_meta *cm = fc_meta_current(t->latch);
    if (cur->mult == 0)
        return 1;
    /* A rate change made and undone since the last poll -- a daemon's,
     * while nobody read -- shows in neither the settings nor the
     * generation, only in a look at the kernel. */
    int64_t k;
    enum look look = look_at_line(t, cur, cm, &k);
    if (look == LOOK_MIGRATED)
        return 0;
    if (look == LOOK_OFF)
        return 1;
    int looked = look == LOOK_WITHIN;
    int64_t last = fc_sync_last_poll();
    if (fc_sync_poll_due(k)) {
        fc_sync_poll(k);
        last = fc_sync_last_poll();
    }
    if (fc_sync_generation() != t->cs->sync_generation)
        return 1;
    struct fc_line l = *cur;
    struct fc_meta m = *cm;
    /* The fast span runs a poll interval past the look (else past the last
     * poll), so that reads look again within 1 ms of reading; not where
     * every read takes the slow path by design, nor on a CPU this thread
     * has left (the next reader there polls).  The look counts with the
     * span it extends: a per-CPU line's bound is counted up to its fast
     * span's end (percpu.c), which must not lie before the look. */
    uint64_t now = 0;
    int spans = !slow_path_only(t), here = spans;
    if (spans && t->cpu < 0) {
        now = fc_now_counter(1);
    } else if (spans) {
        uint32_t aux;
        now = fc_now_counter_aux(&aux);
        here = FC_AUX_CPU(aux) == t->cpu;
    }
    if (looked && (here || !spans))
        m.checked_mono_ns = k;
    if (here) {
        uint64_t used = now - cur->base_tsc;
        if (used >= cm->soft_span)
            return 1;
        /* (k may be older than the last poll where the look was unsure.) */
        int64_t left_ns = looked ? FC_READER_POLL_NS : last + FC_READER_POLL_NS - k;
        if (left_ns > FC_READER_POLL_NS)
            left_ns = FC_READER_POLL_NS;
        if (left_ns < FC_READER_POLL_NS / 16)
            left_ns = FC_READER_POLL_NS / 16;
        uint64_t span = used + (uint64_t)((double)left_ns / line_rate(cur));
        if (span > cm->soft_span)
            span = cm->soft_span;
        if (span > l.fast_span)
            l.fast_span = span;
    }
    if (l.fast_span != cur->fast_span || m.checked_mono_ns != cm->checked_mono_ns)
        fc_line_publish(t->latch, &l, fc_line_base_frac(cur), &m);
    return 0;
}

/* On a reader's path: a kernel read that failed (the look says "off")
 * must not leave its errno behind a read that succeeds. */
int fc_track_poll(const struct fc_track *t)
{
    int saved = errno;
    int r = track_poll(t);
    errno = saved;
    return r;
}

int fc_cal_reader_poll(void)
{
    return fc_track_poll(&fc_global_track);
}

/* ------------------------------------------------------------------ lazy warp check */

/*
 * Without a calibrator thread nobody can run check_tsc_warp (it needs two
 * threads pinned to two CPUs), but the lazy calibrator's own samples land on
 * whatever CPUs the readers run on.  Each sample is tagged with its CPU
 * (rdtscp before and after, where the CPU has it) and compared with a
 * recent one from another CPU: with one counter, the counter and the kernel
 * advance together between them, up to the rate's uncertainty and what the
 * kernel's rate may have done; the rest is the two counters' disagreement.
 * It costs two rdtscp per calibration and nothing at start-up.
 */
#define WARP_SLOTS 64
#define WARP_RECENT_NS 1000000000LL /* compare with samples at most 1 s old (lazy lines last 0.5 s) */
#define WARP_FOUND_NS 2000.0        /* a disagreement beyond this: per-CPU lines */
static struct {
    int cpu;          /* -1: empty */
    uint64_t sync_generation;
    struct fc_sample s;
} warp_seen[WARP_SLOTS] FC_LARGE_BSS;
static int64_t warp_max_cycles = -1;
static int warp_cpu_a, warp_cpu_b;
/* MONOTONIC_RAW ns per counter tick, measured between two samples on one
 * CPU (so that no offset between CPUs' counters leaks into it): from a
 * CPU's anchor sample to a later one on that CPU at least 50 ms on.  Every
 * CPU keeps an anchor, so the rate is known once any CPU has two samples
 * that far apart (with one anchor for all, readers whose samples fell on
 * the other CPU left it unknown, and the check compared on MONOTONIC,
 * where a tick changed and undone unseen looks like a warp).  An anchor
 * moves on at its CPU's first sample 10 s on, so the rate follows a
 * counter that changed; all
 * start over after a suspend (RAW stood still, the counter may not have)
 * and when the counter changed its rate (warp_raw_forget).  0: not known. */
#define WARP_RAW_SPAN_NS 50000000LL
#define WARP_RAW_MOVE_NS (10LL * FC_NS_PER_SEC)
static struct {
    struct {
        int cpu1;            /* its CPU + 1; 0: none */
        struct fc_sample at; /* the anchor */
    } anchor[WARP_SLOTS];
    double rate, unc;
} warp_raw FC_LARGE_BSS;

static void warp_raw_forget(void)
{
    memset(&warp_raw, 0, sizeof warp_raw);
}

static void warp_forget(void)
{
    for (int i = 0; i < WARP_SLOTS; i++)
        warp_seen[i].cpu = -1;
    warp_max_cycles = -1;
    warp_raw_forget();
}

/* Two samples more than a suspend apart (BOOTTIME - MONOTONIC grew). */
static int suspend_between(const struct fc_sample *a, const struct fc_sample *b)
{
    return a->boot_off - b->boot_off > FC_SUSPEND_NS || b->boot_off - a->boot_off > FC_SUSPEND_NS;
}

static void warp_raw_note(const struct fc_sample *s, int cpu)
{
    if (!s->raw_ok || !s->offsets_ok)
        return;
    int slot = cpu % WARP_SLOTS;
    const struct fc_sample *a = &warp_raw.anchor[slot].at;
    if (warp_raw.anchor[slot].cpu1 != cpu + 1 || (int64_t)(s->raw_t - a->raw_t) <= 0 || suspend_between(s, a)) {
        if (warp_raw.anchor[slot].cpu1 == cpu + 1)
            warp_raw_forget(); /* a suspend (or a counter reset): every anchor is from before it */
        warp_raw.anchor[slot].cpu1 = cpu + 1;
        warp_raw.anchor[slot].at = *s;
        return;
    }
    int64_t since = s->raw - a->raw;
    if (since >= WARP_RAW_SPAN_NS) {
        double span = (double)(s->raw_t - a->raw_t);
        warp_raw.rate = (double)since / span;
        warp_raw.unc = ((double)(s->raw_width + a->raw_width) + 2.0 * (double)fc_counter_step()) / span + 1e-9;
    }
    if (since >= WARP_RAW_MOVE_NS)
        warp_raw.anchor[slot].at = *s;
}

/* Returns 1 when s (taken on cpu) shows the counters apart. */
static int warp_note(const struct fc_cal_state *cs, const struct fc_sample *s, int cpu)
{
    int found = 0;
    warp_raw_note(s, cpu);
    /* The kernel phases a new tick or frequency in over the following ticks:
     * its rate is not what any sample says until then.  Compare nothing. */
    if (fc_sync_recent_change(s->mono) > 0)
        return 0;
    double rate = cs->rate, allow_rate = cs->rate_unc + FC_UNSEEN_RATE + fc_sync_rate_allowance();
    /* Where both samples have RAW but its rate is not measured yet, the pair
     * is compared on MONOTONIC with the largest unseen adjtimex change in its
     * slack (sync.c): it tells only a warp beyond that, and RAW, measured
     * soon, tells the rest to within microseconds.  Without RAW the slack
     * stays tight: a tick changed and undone unseen may then pass for a warp
     * -- per-CPU lines, slower but right -- where a wide slack would let a
     * real warp pass for good. */
    const double pending_allow = allow_rate + fc_sync_unseen_rate(rate_tick(cs));
    const double raw_rate = warp_raw.rate, raw_allow = 2.0 * warp_raw.unc + FC_UNSEEN_RATE;
    for (int i = 0; i < WARP_SLOTS; i++) {
        const struct fc_sample *e = &warp_seen[i].s;
        if (warp_seen[i].cpu < 0 || warp_seen[i].cpu == cpu || s->mono - e->mono > WARP_RECENT_NS ||
            warp_seen[i].sync_generation != cs->sync_generation || !s->offsets_ok || suspend_between(s, e))
            continue;
        /* Counter ticks the kernel's time says passed, against the ticks
         * seen: on MONOTONIC_RAW where both samples have it and its rate is
         * measured (a tick or frequency changed and undone between two polls,
         * or an offset slewed, moves MONOTONIC by up to 1/9 of the gap, and
         * RAW not at all), else on MONOTONIC. */
        const int by_raw = raw_rate > 0 && s->raw_ok && e->raw_ok;
        if (by_raw)
            atomic_fetch_add_explicit(&stats.warp_raw_compares, 1, memory_order_relaxed);
        const double r = by_raw ? raw_rate : rate;
        const double allow = by_raw ? raw_allow : s->raw_ok && e->raw_ok ? pending_allow : allow_rate;
        const double dt_ns = by_raw ? (double)(s->raw - e->raw) : (double)(s->mono - e->mono);
        const int64_t ticks = by_raw ? (int64_t)(s->raw_t - e->raw_t) : (int64_t)(s->t - e->t);
        const uint64_t widths = by_raw ? s->raw_width + e->raw_width : s->width + e->width;
        double apart = fc_fabs((double)ticks - dt_ns / r);
        double slack = (double)widths + fc_fabs(dt_ns) * allow / r + 2.0 / r;
        int64_t cycles = apart > slack ? (int64_t)(apart - slack) : 0;
        if (cycles > warp_max_cycles) {
            warp_max_cycles = cycles;
            warp_cpu_a = warp_seen[i].cpu;
            warp_cpu_b = cpu;
        }
        if ((double)cycles * rate > WARP_FOUND_NS)
            found = 1;
    }
    int slot = cpu % WARP_SLOTS;
    warp_seen[slot].cpu = cpu;
    warp_seen[slot].sync_generation = cs->sync_generation;
    warp_seen[slot].s = *s;
    if (warp_max_cycles >= 0)
        fc_warp_note(warp_max_cycles);
    return found;
}

int64_t fc_cal_lazy_warp(int *cpu_a, int *cpu_b)
{
    *cpu_a = warp_cpu_a;
    *cpu_b = warp_cpu_b;
    return warp_max_cycles;
}

/* ------------------------------------------------------------------ entry points */

/* The decision's sample: checks that the counter and the kernel can be read
 * together, and keeps the sample as the start of the history. */
int fc_cal_begin(char *why, size_t why_size)
{
    struct fc_cal_state *cs = fc_global_track.cs;
    struct fc_buf b;
    fc_buf_init(&b, why, why_size);
    atomic_store_explicit(&boot_offset_kept, BOOT_OFFSET_NONE, memory_order_relaxed);
    atomic_store_explicit(&raw_misses, 0, memory_order_relaxed); /* a new decision tries RAW again */
    /* The adjtimex settings before the first sample: a change after this
     * poll shows at the first line's, which then starts its baseline over
     * rather than measure a slope across two rates. */
    fc_sync_poll(fc_kernel_ns(CLOCK_MONOTONIC));
    uint64_t generation = fc_sync_generation();
    struct fc_sample s0;
    uint64_t c0 = fc_now_counter(1);
    int64_t k0 = fc_kernel_ns(CLOCK_MONOTONIC);
    int r = fc_cal_sample(&s0, FC_SAMPLE_TRIES, -1);
    int64_t k1 = fc_kernel_ns(CLOCK_MONOTONIC);
    uint64_t c1 = fc_now_counter(1);
    /* A read's cost is its tightest bracket, in ns at the rate the sample
     * itself shows (kernel and counter both run through a preemption): one
     * preempted read -- a busy machine, qemu translating code -- must not
     * pass for a slow clock, and decide the mode for the process's life. */
    double per_read_ns = (double)(k1 - k0) / (FC_SAMPLE_TRIES + 10);
    if (r == FC_SAMPLE_OK && c1 > c0 && k1 > k0)
        per_read_ns = (double)s0.width * (double)(k1 - k0) / (double)(c1 - c0);
    if (r != FC_SAMPLE_ERROR && per_read_ns > FC_MAX_WIDTH_NS) {
        fc_buf_str(&b, "calibration cannot converge: every read of the kernel clock took over ");
        fc_buf_fixed(&b, per_read_ns / 1000.0, 1);
        fc_buf_str(&b, " us (the machine is too busy or the kernel clock is a slow device)");
        return -1;
    }
    if (r == FC_SAMPLE_ERROR) {
        fc_buf_str(&b, "the kernel's CLOCK_MONOTONIC could not be read");
        return -1;
    }
    if (r == FC_SAMPLE_BACKWARDS) {
        fc_buf_str(&b, "the time-stamp counter went backwards between two reads");
        return -1;
    }
    memset(cs, 0, sizeof *cs);
    cs->sync_generation = generation;
    if (r == FC_SAMPLE_OK) {
        history_push(cs, &s0);
        cs->decided = s0;
    }
    /* Until the first line: look again once the baseline can be measured. */
    atomic_store_explicit(&stats.interval_ns, FC_FIRST_BASELINE_NS, memory_order_relaxed);
    return 0;
}

/* With the lock held, mode tsc and no line yet: a second sample at least
 * FC_FIRST_BASELINE_NS after the first gives the rate (uncertainty ~ bracket
 * width / baseline, ~1e-3; the bound says so and the next calibrations, 100 us
 * apart and doubling, shrink it).  The counter instruction is chosen here,
 * before any reader can use the counter.
 *
 * Both samples lie between two adjtimex polls that found the same settings
 * (the first before the decision's sample or a restart's, the second after
 * this one): a slope across a change would mix two rates, with an
 * uncertainty from the bracket widths alone.  A change starts the baseline
 * over; after two such restarts (a daemon that steers several times a
 * second, a lazy process that reads less often) the baseline is the
 * shortest, measured within one call, so the first line still comes. */
static int first_line(void)
{
    struct fc_cal_state *cs = fc_global_track.cs;
    struct fc_sample s1;
    if (cs->n == 0) { /* the decision's sample was noisy, or the settings changed: take it now */
        fc_sync_poll(fc_kernel_ns(CLOCK_MONOTONIC)); /* one in progress elsewhere: its count shows later */
        cs->sync_generation = fc_sync_generation();
        if (fc_cal_sample(&s1, FC_SAMPLE_TRIES, -1) != FC_SAMPLE_OK)
            return FC_RECAL_SKIPPED;
        history_push(cs, &s1);
        if (cs->baseline_restarts < 2)
            return FC_RECAL_SKIPPED;
        int64_t now = fc_kernel_ns(CLOCK_MONOTONIC);
        while (now >= s1.mono && now - s1.mono < FC_FIRST_BASELINE_NS) { /* below: the read failed */
            fc_cpu_relax();
            now = fc_kernel_ns(CLOCK_MONOTONIC);
        }
    }
    const struct fc_sample s0 = cs->hist[0];
    if (fc_kernel_ns(CLOCK_MONOTONIC) - s0.mono < FC_FIRST_BASELINE_NS)
        return FC_RECAL_SKIPPED;
    int r = fc_cal_sample(&s1, FC_SAMPLE_TRIES, -1);
    if (r == FC_SAMPLE_BACKWARDS || (r == FC_SAMPLE_OK && s1.t <= s0.t)) {
        return global_failed("the time-stamp counter went backwards between two calibration samples");
    }
    if (r != FC_SAMPLE_OK) {
        if (++cs->noisy_in_a_row > 50) {
            return global_failed("calibration cannot converge: reads of the kernel clock are too slow "
                                 "or too often interrupted");
        }
        return FC_RECAL_SKIPPED;
    }
    double measured = (double)(s1.mono - s0.mono) / (double)(s1.t - s0.t);
    double step = (double)fc_counter_step();
    double w0 = ((double)s0.width + step) * measured, w1 = ((double)s1.width + step) * measured;
    if (!(measured > 0) || measured > 1e6) {
        return global_failed("the counter's rate against CLOCK_MONOTONIC is not plausible");
    }
    if (w0 > FC_MAX_WIDTH_NS || w1 > FC_MAX_WIDTH_NS) {
        /* A slow kernel clock (or a preempted bracket): start over from here. */
        cs->hist[0] = s1;
        if (++cs->noisy_in_a_row > 50) {
            char msg[256];
            struct fc_buf b;
            fc_buf_init(&b, msg, sizeof msg);
            fc_buf_str(&b, "calibration cannot converge: every read of the kernel clock took over ");
            fc_buf_fixed(&b, (w0 > w1 ? w0 : w1) / 1000.0, 1);
            fc_buf_str(&b, " us (the machine is too busy or the kernel clock is a slow device)");
            return global_failed(msg);
        }
        return FC_RECAL_SKIPPED;
    }
    /* A poll in progress may have seen a change it has not counted yet.
     * Another thread's lasts a microsecond: wait up to 20 us for it (its
     * thread may be preempted; then a later read looks again).  This
     * thread's own, under a signal handler: the next read. */
    int polled = fc_sync_poll(s1.mono);
    for (int i = 0; polled == FC_SYNC_POLL_BUSY && i < 4096; i++) { /* a clock that stands still: a test's */
        int64_t now = fc_kernel_ns(CLOCK_MONOTONIC);
        if (now < s1.mono || now > s1.mono + 20000)
            break;
        fc_cpu_relax();
        polled = fc_sync_poll(now);
    }
    if (polled < 0)
        return FC_RECAL_SKIPPED;
    uint64_t generation = fc_sync_generation();
    if (generation != cs->sync_generation) {
        /* adjtimex changed the kernel's rate since before s0 (s1 may
         * predate the change): a new baseline from the next sample. */
        cs->n = 0;
        cs->baseline_restarts++;
        return FC_RECAL_SKIPPED;
    }
    cs->noisy_in_a_row = 0;
    cs->rate = measured;
    cs->rate_unc = (w0 + w1) * 0.5 / (double)(s1.mono - s0.mono) + 1e-9;
    __atomic_store_n(&fc_latch.read_flags, fc_counter_choose(measured), __ATOMIC_RELAXED); /* readers load it racily */
    rescale_for_settings(cs); /* records the settings the rate was measured under */
    history_push(cs, &s1);
    build_and_publish(&fc_global_track, &s1, BUILD_FIRST);
    return FC_RECAL_OK;
}

int fc_rate_seed_settings(struct fc_rate_seed *seed, int64_t mono_now)
{
    int polled = fc_sync_poll(mono_now);
    seed->settings_known = fc_sync_settings(&seed->freq, &seed->tick);
    return polled;
}

int fc_track_start(const struct fc_track *t, const struct fc_rate_seed *seed)
{
    struct fc_sample s;
    int r = fc_cal_sample(&s, FC_SAMPLE_TRIES, t->cpu);
    if (r != FC_SAMPLE_OK || (double)s.width * seed->rate > FC_MAX_WIDTH_NS)
        return -1;
    struct fc_cal_state *cs = t->cs;
    /* A CPU given up for stepping starts over with the times of its last
     * steps: one more within their minute gives it up again
     * (counter_keeps_stepping). */
    int64_t step_mono[3];
    memcpy(step_mono, cs->step_mono, sizeof step_mono);
    memset(cs, 0, sizeof *cs);
    memcpy(cs->step_mono, step_mono, sizeof step_mono);
    cs->sync_generation = fc_sync_generation();
    cs->rate = seed->rate;
    double unc = seed->unc > 1e-6 ? seed->unc : 1e-6; /* this CPU's rate is not measured yet */
    if (seed->settings_known) {
        /* A CPU's first line may come long after the seed: the rate
         * rescaled to the settings now, its uncertainty widened as after a
         * change seen.  Not known: neither is the line's tick (every tick
         * counts, sync.c). */
        cs->settings_known = 1;
        cs->set_tick = seed->tick;
        cs->set_freq = seed->freq;
        rescale_for_settings(cs);
        if (cs->rate != seed->rate)
            unc += unc_after_change(fc_fabs(cs->rate / seed->rate - 1.0));
    }
    cs->rate_unc = unc;
    history_push(cs, &s);
    build_and_publish(t, &s, BUILD_FIRST);
    return 0;
}

/* Large rate jumps in a short time mean the counter cannot be trusted. */
static int note_reset_and_check(struct fc_cal_state *cs, int64_t mono_now)
{
    if (mono_now - cs->last_reset_mono > 60LL * FC_NS_PER_SEC)
        cs->resets_recent = 0;
    cs->last_reset_mono = mono_now;
    return ++cs->resets_recent > 5;
}

/*
 * A CPU whose counter keeps stepping (reset below its last sample, or moved
 * by over 10 us where MONOTONIC_RAW says the counter, not the kernel,
 * changed): each step can leave that CPU's reads off by it, beyond the
 * bound, until the next look at the kernel (at most the line's fast span,
 * ~1 ms), and a step forward leaves a line ahead that only slews back.  One
 * step is a VM's migration or a firmware hiccup; a third within a minute of
 * the two before it gives the CPU up (its line ends; the kernel answers it,
 * and percpu.c tries it again later, keeping the step times, so one more
 * step within a minute of the last two gives it up again).  Global track:
 * a counter that goes back is a failure already (mode system).
 */
#define STEP_WINDOW_NS (60LL * FC_NS_PER_SEC)
/* A move of the counter against MONOTONIC_RAW counts as a step only past
 * this: a smaller one stays inside any bound the line reports (tens of us),
 * and a kvm-clock guest's RAW wobbles by far less when a vCPU moves. */
#define STEP_COUNTS_NS 10000.0
static int counter_keeps_stepping(struct fc_cal_state *cs, int64_t mono_now)
{
    _Static_assert(sizeof cs->step_mono / sizeof cs->step_mono[0] == 3, "the third step gives up");
    cs->step_mono[0] = cs->step_mono[1];
    cs->step_mono[1] = cs->step_mono[2];
    cs->step_mono[2] = mono_now;
    /* This step and the two before it, all within the window. */
    return cs->step_mono[0] != 0 && mono_now - cs->step_mono[0] <= STEP_WINDOW_NS;
}

/* A per-CPU track that cannot be calibrated is given up after 15 s; the
 * global one falls back to mode system at once when the counter misbehaves.
 * mono_now 0: read the kernel's clock here (only failures need it). */
static int track_failure(const struct fc_track *t, const char *global_reason, int64_t mono_now)
{
    if (t->cpu < 0 && global_reason)
        return global_failed(global_reason);
    if (!mono_now)
        mono_now = fc_kernel_ns(CLOCK_MONOTONIC);
    if (!mono_now) /* the kernel's clock cannot be read: nothing to wait 15 s by (the global
                      track's own count of errors decides for it, with its reason) */
        return t->cpu < 0 ? FC_RECAL_SKIPPED : FC_RECAL_FAILED;
    if (!t->cs->failing_since)
        t->cs->failing_since = mono_now ? mono_now : 1;
    if (mono_now - t->cs->failing_since >= FC_GIVE_UP_NS)
        return FC_RECAL_FAILED;
    return FC_RECAL_SKIPPED;
}

/* The line in use ends at counter value t: past it, it answers no read
 * (a counter below its base, or past its span, fails the span check
 * already). */
static void end_line_at(struct fc_latch *latch, uint64_t t)
{
    const struct fc_line *cur = fc_line_current(latch);
    const struct fc_meta *cm = fc_meta_current(latch);
    if ((uint64_t)(t - cur->base_tsc) < cm->soft_span)
        publish_cut(latch, cur, cm, t - cur->base_tsc, 1);
}

/* A per-CPU track whose counter keeps stepping (counter_keeps_stepping):
 * its line ends at this sample, the history starts over, and the track
 * fails at once (percpu.c gives the CPU up). */
static int counter_given_up(const struct fc_track *t, const struct fc_sample *s)
{
    end_line_at(t->latch, s->t);
    t->cs->n = 0;
    t->cs->jump_ref = 0;
    t->cs->failing_since = 0;
    return FC_RECAL_FAILED;
}

int fc_track_recalibrate(const struct fc_track *t)
{
    struct fc_cal_state *cs = t->cs;
    struct fc_sample s;
    /* The lazy global track notes the CPU of its samples (warp check). */
    int lazy_warp = t->cpu < 0 && !fc_upkeep_running() &&
                    (fc_seam.counter ? fc_seam.counter_aux != 0 : fc_counter_has_rdtscp());
    uint32_t aux0 = 0, aux1 = 1;
    if (lazy_warp)
        fc_now_counter_aux(&aux0);
    int r = fc_cal_sample(&s, FC_SAMPLE_TRIES, t->cpu);
    if (lazy_warp)
        fc_now_counter_aux(&aux1);
    if (r == FC_SAMPLE_BACKWARDS)
        return track_failure(t, "the time-stamp counter went backwards between two ordered reads", 0);
    if (r == FC_SAMPLE_ERROR) {
        if (++cs->noisy_in_a_row > 50)
            return track_failure(t, "the kernel's clocks could not be read for calibration", 0);
        return track_failure(t, 0, 0);
    }
    if (r != FC_SAMPLE_OK || (double)s.width * cs->rate > FC_MAX_WIDTH_NS) {
        /* Preempted or migrated in every try.  Keep the line; give up only if it lasts. */
        if (++cs->noisy_in_a_row > 50)
            return track_failure(t, "calibration cannot converge: reads of the kernel clock are "
                                    "too slow or too often interrupted", 0);
        return track_failure(t, 0, 0);
    }
    cs->noisy_in_a_row = 0;
    int gen_restart = 0;
    fc_sync_poll(s.mono);
    uint64_t gen = fc_sync_generation();
    if (gen != cs->sync_generation) {
        /* adjtimex changed the kernel's rate (whichever poll saw it first):
         * the history describes the old rate, and the rate we keep is off by
         * up to the change until two new samples measure it. */
        cs->sync_generation = gen;
        gen_restart = 1;
        double before = cs->rate;
        rescale_for_settings(cs);
        /* A pending judgement of the counter's own change compares with
         * the rate before it, under the new settings. */
        if (cs->jump_ref > 0 && before > 0)
            cs->jump_ref *= cs->rate / before;
        widen_for_change(cs, fc_sync_last_change());
    }

    if (cs->n == 0) {
        cs->jump_ref = 0;
        history_push(cs, &s);
        cs->resume_lapsed = 0; /* restarted after failures: the line may be in use */
        if (cs->remeasure) {
            /* The rate is one sample from known: that is no failure (the
             * 15 s to give up count from the next failure, not from the
             * refusal, which may be long ago in a lazy process). */
            cs->failing_since = 0;
            return FC_RECAL_SKIPPED;
        }
        build_and_publish(t, &s, BUILD_RESUMED);
        return FC_RECAL_OK;
    }
    const struct fc_sample *last = &cs->hist[cs->n - 1];
    int suspended = s.offsets_ok && last->offsets_ok && s.boot_off - last->boot_off > FC_SUSPEND_NS;
    if (s.t <= last->t && !suspended) {
        if (t->cpu < 0)
            return track_failure(t, "the time-stamp counter went backwards between calibrations: "
                                    "counters are not synchronised across CPUs or were reset", 0);
        if (counter_keeps_stepping(cs, s.mono))
            return counter_given_up(t, &s);
        suspended = 1; /* one CPU's counter was reset: start its line over */
    }
    if (suspended) {
        /* The kernel's MONOTONIC stood still while the counter stopped, reset
         * or ran on: the history is meaningless across it.  Had the old line
         * lapsed before the resume?  Yes if the counter was reset, or if even
         * a suspend starting at the last sample ends past the line's end (a
         * running counter advanced by the BOOTTIME gap meanwhile). */
        uint64_t seq = atomic_load_explicit(&t->latch->seq, memory_order_relaxed);
        const struct fc_line *cur = &t->latch->line[seq & 1];
        const struct fc_meta *cm = &t->latch->meta[seq & 1];
        double gap_ticks = (double)(s.boot_off - last->boot_off) / cs->rate;
        cs->resume_lapsed = (int64_t)(s.t - cur->base_tsc) < 0 ||
                            (double)(int64_t)(last->t - cur->base_tsc) + gap_ticks >= (double)cm->soft_span;
        cs->n = 0;
        cs->jump_ref = 0;
        history_push(cs, &s);
        atomic_fetch_add_explicit(&stats.rate_resets, 1, memory_order_relaxed);
        if (cs->remeasure)
            return track_failure(t, 0, s.mono);
        build_and_publish(t, &s, BUILD_RESUMED);
        return FC_RECAL_OK;
    }

    if (gen_restart) {
        /* Start over from this sample alone: one from before the change
         * would give a slope across it, with a falsely small uncertainty. */
        cs->n = 0;
        history_push(cs, &s);
        if (cs->remeasure)
            return track_failure(t, 0, s.mono);
        build_and_publish(t, &s, BUILD_CONTINUE);
        return FC_RECAL_OK;
    }
    if (lazy_warp && aux0 == aux1 && warp_note(cs, &s, FC_AUX_CPU(aux0)))
        return FC_RECAL_WARP; /* the line stays until mode.c moves to per-CPU lines */
    history_push(cs, &s);
    double old_rate = cs->rate;
    double misfit_ns = 0;
    int restarted = update_rate(cs, &misfit_ns);
    double new_rate = cs->rate;
    if (restarted == 0 && cs->jump_ref > 0 && cs->n >= 2) {
        /* The counter changed its rate (RAW said so) since the restart: the
         * slope across the change understated how much (the sooner it is
         * seen, the less of the span is after it).  The samples since
         * measure it, once they are sure to 1e-4 (about 1 ms of them). */
        const struct fc_sample *a = &cs->hist[0], *b = &cs->hist[cs->n - 1];
        double span = (double)(b->t - a->t);
        double est = (double)(b->mono - a->mono) / span;
        double unc = (sigma_ns(a, est) + sigma_ns(b, est)) / (span * est);
        if (unc < 1e-4) {
            /* Sure to 1e-4: a tenth of the smallest jump that counts. */
            restarted = 1;
            old_rate = cs->jump_ref;
            new_rate = est;
            cs->jump_ref = 0;
        }
    } else if (restarted == 3) {
        cs->jump_ref = old_rate; /* judged by the samples that follow */
        restarted = 0;
        if (t->cpu < 0)
            warp_raw_forget(); /* the lazy warp check's RAW rate is the old counter's */
        else if (fc_fabs(misfit_ns) > STEP_COUNTS_NS && counter_keeps_stepping(cs, s.mono))
            return counter_given_up(t, &s);
    } else if (restarted == 1) {
        cs->jump_ref = 0; /* judged now, against the rate just before */
    }
    if (restarted == 1) {
        double jump = fc_fabs(new_rate / old_rate - 1.0);
        /* A jump the kernel's own recent rate change explains (adjtimex tick
         * or frequency, applied over the following ticks) is not the counter. */
        double kernel_change = fc_sync_recent_change(s.mono);
        if (kernel_change > 0 && jump <= 2.0 * kernel_change + 2e-3) {
            widen_for_change(cs, kernel_change);
        } else if (jump > 0.05 || (jump > 1e-3 && note_reset_and_check(cs, s.mono))) {
            if (t->cpu < 0)
                return track_failure(t, "the counter's rate keeps changing against CLOCK_MONOTONIC "
                                        "(it is not invariant in practice)", s.mono);
            /* Refused: the rate just judged (without RAW, the slope across
             * the change: neither the old rate nor the new one) carries no
             * line, and neither does the one before it, which the counter
             * may have left.  No line until two samples after the change
             * measure the rate (the kernel answers this CPU meanwhile); the
             * uncertainty, internal until then, lets their slope replace
             * the rate whatever it is. */
            cs->n = 0;
            cs->rate = old_rate;
            cs->rate_unc = 1.0;
            cs->remeasure = 1;
            /* The line in use ends here: past this sample it answers no
             * read (its poll finds it spent, and the calibration that
             * follows publishes nothing yet).  Ended, not just cut: the
             * line that resumes starts at the kernel's time, not at the
             * old line's uncut end (ahead of the kernel where the counter
             * sped up).  tsc-percpu needs no more: each thread's clamp
             * keeps it monotonic (over the few reads between this sample
             * and the cut showing too), and the mode's bound covers a step
             * across CPUs. */
            end_line_at(t->latch, s.t);
            return track_failure(t, 0, s.mono);
        }
    }
    /* Two samples since a refused jump measured the rate: this CPU's line
     * resumes, as after failures. */
    enum build_kind kind = cs->remeasure ? BUILD_RESUMED : BUILD_CONTINUE;
    cs->remeasure = 0;
    build_and_publish(t, &s, kind);
    return FC_RECAL_OK;
}

int fc_cal_recalibrate(void)
{
    if (fc_line_current(&fc_latch)->mult == 0)
        return first_line();
    return fc_track_recalibrate(&fc_global_track);
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
    out->warp_raw_compares = atomic_load_explicit(&stats.warp_raw_compares, memory_order_relaxed);
}

int fc_cal_ticks_to_ns(int64_t ticks, int64_t *ns)
{
    int64_t mult = atomic_load_explicit(&ticks_mult, memory_order_relaxed);
    *ns = (int64_t)(((__int128)ticks * mult) >> FC_SHIFT);
    return mult != 0;
}

void fc_cal_reset_for_tests(void)
{
    warp_forget();
    atomic_store(&raw_misses, 0);
    atomic_store(&fallback.noted, 0);
    atomic_store(&fallback.returned, 0);
    atomic_store(&fallback.publishing, 0);
    atomic_store(&fallback.covered_to, 0);
    atomic_store(&fallback.covered_epoch, 0);
    memset(&global_state, 0, sizeof global_state);
    atomic_store(&stats.calibrations, 0);
    atomic_store(&stats.last_err_ns, 0);
    atomic_store(&stats.max_err_ns, 0);
    atomic_store(&stats.realtime_steps, 0);
    atomic_store(&stats.rate_resets, 0);
    atomic_store(&stats.warp_raw_compares, 0);
    atomic_store(&stats.interval_ns, 0);
    atomic_store(&ticks_mult, 0);
    atomic_store(&global_lock, 0);
    /* The calling thread's marks too: a test that failed holding the lock
     * must not leave the next one looking like a holder. */
    cal_held_here = 0;
    publishing_here = 0;
    fc_sync_reset_for_tests();
}
