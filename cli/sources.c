#define _GNU_SOURCE
#include "sources.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "counter.h"
#include "cpu.h"
#include "fastclock.h"
#include "fastclock_inline.h"
#include "util.h"

const struct clock_name src_clocks[] = {
    {"CLOCK_REALTIME", CLOCK_REALTIME},
    {"CLOCK_MONOTONIC", CLOCK_MONOTONIC},
    {"CLOCK_PROCESS_CPUTIME_ID", CLOCK_PROCESS_CPUTIME_ID},
    {"CLOCK_THREAD_CPUTIME_ID", CLOCK_THREAD_CPUTIME_ID},
    {"CLOCK_MONOTONIC_RAW", CLOCK_MONOTONIC_RAW},
    {"CLOCK_REALTIME_COARSE", CLOCK_REALTIME_COARSE},
    {"CLOCK_MONOTONIC_COARSE", CLOCK_MONOTONIC_COARSE},
    {"CLOCK_BOOTTIME", CLOCK_BOOTTIME},
    {"CLOCK_REALTIME_ALARM", CLOCK_REALTIME_ALARM},
    {"CLOCK_BOOTTIME_ALARM", CLOCK_BOOTTIME_ALARM},
    {"CLOCK_TAI", CLOCK_TAI},
};
const int src_nclocks = sizeof src_clocks / sizeof src_clocks[0];

const char *src_group_name(enum src_group g)
{
    switch (g) {
    case GROUP_COUNTER: return "counter";
    case GROUP_FASTCLOCK: return "fastclock";
    case GROUP_LIBC: return "libc";
    default: return "syscall";
    }
}

const char *src_unit_name(enum src_unit u)
{
    switch (u) {
    case UNIT_TICKS: return "ticks";
    case UNIT_US: return "us";
    case UNIT_S: return "s";
    default: return "ns";
    }
}

/* ---- one read of each source ------------------------------------------- */

/* Paired loops do the same work: every call's return value is tested, by
 * libc's loops and fastclock's alike (fastclock_gettime,
 * fastclock_gettimeofday), and no loop branches on how to call (libc or
 * system call) per read: each way has its own function. */

static inline int64_t cg_ns(long id)
{
    struct timespec ts;
    if (clock_gettime((clockid_t)id, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int64_t sys_cg_ns(long id)
{
    struct timespec ts;
    if (syscall(SYS_clock_gettime, (clockid_t)id, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int64_t fc_gettime_ns(clockid_t id)
{
    struct timespec ts;
    if (fastclock_gettime(id, &ts) != 0)
        return 0;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline int64_t gtod_us(void)
{
    struct timeval tv;
    if (gettimeofday(&tv, NULL) != 0)
        return 0;
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

static inline int64_t sys_gtod_us(void)
{
    struct timeval tv;
    if (syscall(SYS_gettimeofday, &tv, NULL) != 0)
        return 0;
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

static inline int64_t fc_gtod_us(void)
{
    struct timeval tv;
    if (fastclock_gettimeofday(&tv, NULL) != 0)
        return 0;
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

static inline int64_t sys_time_s(void)
{
#ifdef SYS_time
    return (int64_t)syscall(SYS_time, NULL);
#else
    return -1; /* not a source here (src_time) */
#endif
}

/* The two fenced counter reads as fastclock's ordered reads execute them
 * (counter.h fc_counter_fenced: on x86-64 rdtscp's or lfence;rdtsc's halves
 * as the instruction leaves them; on arm64 mrs cntvctss_el0 or
 * isb;mrs cntvct_el0, each followed by the kernel's ordering dependency):
 * the floors of fastclock_mono_ns. */
static inline int64_t fenced_alt(void) { return (int64_t)fc_counter_fenced(FC_READ_RDTSCP); }
static inline int64_t fenced_default(void) { return (int64_t)fc_counter_fenced(0); }

/* Readers (for granularity) and loops (for cost) share these expressions. */
#define SOURCE(name, expr)                                                  \
    static int64_t r_##name(long arg)                                       \
    {                                                                       \
        (void)arg;                                                          \
        return (int64_t)(expr);                                             \
    }                                                                       \
    static __attribute__((noinline)) uint64_t l_##name(uint64_t n, long arg) \
    {                                                                       \
        (void)arg;                                                          \
        uint64_t acc = 0;                                                   \
        for (uint64_t i = 0; i < n; i++)                                    \
            acc += (uint64_t)(expr);                                        \
        return acc;                                                         \
    }

SOURCE(counter, fc_counter_unordered())
SOURCE(counter_p, fenced_alt())
SOURCE(counter_f, fenced_default())
SOURCE(fc_mono, fastclock_mono_ns())
SOURCE(fc_mono_u, fastclock_mono_ns_unordered())
SOURCE(fc_real, fastclock_real_ns())
SOURCE(fc_real_u, fastclock_real_ns_unordered())
SOURCE(fc_mono_c, fastclock_mono_coarse_ns())
SOURCE(fc_real_c, fastclock_real_coarse_ns())
SOURCE(fc_ticks, fastclock_ticks())
SOURCE(fc_mono_i, fastclock_mono_ns_inline())
SOURCE(fc_mono_ui, fastclock_mono_ns_unordered_inline())
SOURCE(fc_mono_ci, fastclock_mono_coarse_ns_inline())
SOURCE(fc_gettime, fc_gettime_ns(CLOCK_MONOTONIC))
SOURCE(fc_gettime_real, fc_gettime_ns(CLOCK_REALTIME))
SOURCE(fc_gtod, fc_gtod_us())
SOURCE(cg, cg_ns(arg))
SOURCE(sys_cg, sys_cg_ns(arg))
SOURCE(gtod, gtod_us())
SOURCE(sys_gtod, sys_gtod_us())
SOURCE(time, time(NULL))
SOURCE(sys_time, sys_time_s())

/* ---- constructors ------------------------------------------------------- */

static void init(struct source *s, const char *key, const char *note, enum src_group g, src_loop_fn loop,
                 src_read_fn read, enum src_unit unit, long arg)
{
    memset(s, 0, sizeof *s);
    copy_str(s->key, sizeof s->key, key);
    s->note = note;
    s->group = g;
    s->loop = loop;
    s->read = read;
    s->unit = unit;
    s->arg = arg;
    s->usable = 1;
    s->median = s->min = s->max = NAN;
    s->step_native = s->step_ns = NAN;
}

void src_counter(struct source *s, int which)
{
#if defined(__x86_64__) || defined(__i386__)
    static const char *const keys[] = {"rdtsc", "rdtscp", "lfence;rdtsc"};
    static const char *const notes[] = {
        "bare counter read; the CPU may execute it early (out of order)",
        "ordered read (waits for earlier instructions); fastclock's on Intel, and where lfence may not order rdtsc",
        "ordered read; fastclock's on AMD where lfence orders rdtsc (each vendor's unless it costs 1.25x the other)"};
#else
    /* The ordered reads fastclock may choose (counter.c): isb;cntvct_el0,
     * or with FEAT_ECV the self-synchronised cntvctss_el0, which needs no isb. */
    static const char *const keys[] = {"cntvct_el0", "cntvctss_el0", "isb;cntvct_el0"};
    static const char *const notes[] = {"bare counter read; the CPU may read it early or late",
                                        "ordered read without isb (FEAT_ECV); fastclock's where the CPU has it",
                                        "ordered read (the kernel vDSO's)"};
#endif
    static const src_loop_fn loops[] = {l_counter, l_counter_p, l_counter_f};
    static const src_read_fn reads[] = {r_counter, r_counter_p, r_counter_f};
    init(s, keys[which], notes[which], GROUP_COUNTER, loops[which], reads[which], UNIT_TICKS, 0);
    if (!FC_HAVE_COUNTER) {
        s->usable = 0;
        s->err = ENOSYS;
    } else if (which == 1) {
        /* rdtscp, cntvctss_el0: an undefined instruction where the CPU lacks it. */
#if defined(__x86_64__) || defined(__i386__)
        int present = fc_cpu_has_rdtscp();
#else
        int present = fc_cpu_counter_self_synced();
#endif
        if (!present) {
            s->usable = 0;
            s->err = ENOTSUP;
        }
    }
}

void src_fastclock(struct source *s, int which)
{
    static const struct {
        const char *key, *note;
        src_loop_fn loop;
        src_read_fn read;
        enum src_unit unit;
    } t[FC_SRC_COUNT] = {
        {"fastclock_mono_ns", "ordered: monotonic across threads", l_fc_mono, r_fc_mono, UNIT_NS},
        {"fastclock_mono_ns_unordered", "monotonic per thread only", l_fc_mono_u, r_fc_mono_u, UNIT_NS},
        {"fastclock_real_ns", "ordered CLOCK_REALTIME", l_fc_real, r_fc_real, UNIT_NS},
        {"fastclock_real_ns_unordered", "CLOCK_REALTIME, per thread", l_fc_real_u, r_fc_real_u, UNIT_NS},
        {"fastclock_mono_coarse_ns", "about 1 ms resolution", l_fc_mono_c, r_fc_mono_c, UNIT_NS},
        {"fastclock_real_coarse_ns", "about 1 ms resolution", l_fc_real_c, r_fc_real_c, UNIT_NS},
        {"fastclock_ticks", "raw counter for intervals in one thread", l_fc_ticks, r_fc_ticks, UNIT_TICKS},
        {"fastclock_gettime(CLOCK_MONOTONIC)", "clock_gettime-compatible", l_fc_gettime, r_fc_gettime, UNIT_NS},
        {"fastclock_mono_ns_inline", "fastclock_inline.h: no call", l_fc_mono_i, r_fc_mono_i, UNIT_NS},
        {"fastclock_mono_ns_unordered_inline", "fastclock_inline.h: no call", l_fc_mono_ui, r_fc_mono_ui, UNIT_NS},
        {"fastclock_mono_coarse_ns_inline", "fastclock_inline.h: a load", l_fc_mono_ci, r_fc_mono_ci, UNIT_NS},
        {"fastclock_gettime(CLOCK_REALTIME)", "clock_gettime-compatible", l_fc_gettime_real, r_fc_gettime_real, UNIT_NS},
        {"fastclock_gettimeofday", "gettimeofday-compatible, microseconds", l_fc_gtod, r_fc_gtod, UNIT_US},
    };
    init(s, t[which].key, t[which].note, GROUP_FASTCLOCK, t[which].loop, t[which].read, t[which].unit, 0);
}

void src_clock_gettime(struct source *s, int i)
{
    char key[64];
    snprintf(key, sizeof key, "clock_gettime(%s)", src_clocks[i].name);
    init(s, key, "libc (vDSO when the clocksource allows)", GROUP_LIBC, l_cg, r_cg, UNIT_NS, src_clocks[i].id);
    struct timespec ts;
    if (clock_gettime(src_clocks[i].id, &ts) != 0) {
        s->usable = 0;
        s->err = errno;
    }
}

void src_syscall_clock_gettime(struct source *s, int i)
{
    char key[64];
    snprintf(key, sizeof key, "syscall(clock_gettime, %s)", src_clocks[i].name);
    init(s, key, "always enters the kernel", GROUP_SYSCALL, l_sys_cg, r_sys_cg, UNIT_NS, src_clocks[i].id);
    struct timespec ts;
    if (syscall(SYS_clock_gettime, src_clocks[i].id, &ts) != 0) {
        s->usable = 0;
        s->err = errno;
    }
}

void src_gettimeofday(struct source *s, int via_syscall)
{
    if (via_syscall)
        init(s, "syscall(gettimeofday)", "always enters the kernel", GROUP_SYSCALL, l_sys_gtod, r_sys_gtod, UNIT_US, 0);
    else
        init(s, "gettimeofday", "libc, microseconds", GROUP_LIBC, l_gtod, r_gtod, UNIT_US, 0);
}

void src_time(struct source *s, int via_syscall)
{
    if (via_syscall)
        init(s, "syscall(time)", "always enters the kernel", GROUP_SYSCALL, l_sys_time, r_sys_time, UNIT_S, 0);
    else
        init(s, "time", "libc, seconds", GROUP_LIBC, l_time, r_time, UNIT_S, 0);
#ifndef SYS_time
    if (via_syscall) {
        s->usable = 0;
        s->err = ENOSYS;
    }
#endif
}

/* ---- cost --------------------------------------------------------------- */

static volatile uint64_t sink;

static double batch_ns_per_call(struct source *s, uint64_t n)
{
    int64_t t0 = mono_raw_ns();
    sink += s->loop(n, s->arg);
    int64_t t1 = mono_raw_ns();
    return (double)(t1 - t0) / (double)n;
}

static void calibrate(struct source *s, double batch_ns)
{
    uint64_t n = 8;
    for (;;) {
        double per = batch_ns_per_call(s, n);
        double total = per * (double)n;
        if (total >= batch_ns / 4 || n >= (1u << 28)) {
            double want = per > 0 ? batch_ns / per : (double)n;
            if (want < 1)
                want = 1;
            if (want > (double)(1u << 28))
                want = (double)(1u << 28);
            s->n = (uint64_t)want;
            return;
        }
        n *= 4;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void stats(struct source *s)
{
    if (s->count == 0)
        return;
    double *v = malloc((size_t)s->count * sizeof *v);
    if (!v)
        return;
    memcpy(v, s->samples, (size_t)s->count * sizeof *v);
    qsort(v, (size_t)s->count, sizeof *v, cmp_double);
    int m = s->count / 2;
    s->median = s->count % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
    s->min = v[0];
    s->max = v[s->count - 1];
    free(v);
}

static void src_measure_here(struct source *s, int n, double seconds, double batch_ns, int min_rounds,
                             src_progress_fn progress, void *ctx)
{
    int usable = 0;
    for (int i = 0; i < n; i++) {
        if (!s[i].usable)
            continue;
        usable++;
        /* Warm up caches, the vDSO page, fastclock's first calibration. */
        sink += s[i].loop(64, s[i].arg);
        calibrate(&s[i], batch_ns);
    }
    if (!usable)
        return;
    int rounds = (int)(seconds * 1e9 / ((double)usable * batch_ns * 1.05));
    if (rounds < min_rounds)
        rounds = min_rounds;
    for (int i = 0; i < n; i++) {
        free(s[i].samples);
        s[i].samples = calloc((size_t)rounds, sizeof(double));
        s[i].cap = s[i].samples ? rounds : 0;
        s[i].count = 0;
    }
    /* On a busy machine batches take longer than planned: stop at 1.5x the
     * budget once min_rounds are in, so --quick stays quick. */
    int64_t deadline = mono_raw_ns() + (int64_t)(seconds * 1.5e9);
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++)
            if (s[i].usable && s[i].count < s[i].cap)
                s[i].samples[s[i].count++] = batch_ns_per_call(&s[i], s[i].n);
        if (progress)
            progress("cost", r + 1, rounds, ctx);
        if (r + 1 >= min_rounds && mono_raw_ns() > deadline)
            break;
    }
    for (int i = 0; i < n; i++)
        stats(&s[i]);
}

void src_measure(struct source *s, int n, double seconds, double batch_ns, int min_rounds,
                 src_progress_fn progress, void *ctx)
{
    /* On the CPU it starts on, for the whole phase: every source's batches
     * on one core (a hybrid CPU's P and E cores differ; tsc-percpu's read
     * depends on the CPU), the affinity given back after. */
    cpu_set_t before, one;
    int pinned = 0, cpu = sched_getcpu();
    if (cpu >= 0 && cpu < CPU_SETSIZE && sched_getaffinity(0, sizeof before, &before) == 0) {
        CPU_ZERO(&one);
        CPU_SET(cpu, &one);
        pinned = pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
    }
    src_measure_here(s, n, seconds, batch_ns, min_rounds, progress, ctx);
    if (pinned)
        pthread_setaffinity_np(pthread_self(), sizeof before, &before);
}

void src_free(struct source *s, int n)
{
    for (int i = 0; i < n; i++) {
        free(s[i].samples);
        s[i].samples = NULL;
        s[i].count = s[i].cap = 0;
    }
}

/* ---- granularity -------------------------------------------------------- */

void src_step(struct source *s, double window_ns, double ticks_hz)
{
    s->step_native = s->step_ns = NAN;
    s->step_changes = 0;
    if (!s->usable)
        return;
    /* The smallest step seen.  A step is never seen smaller than the
     * clock's, but often larger: a reader preempted across a tick sees two
     * as one, and a guest whose vCPU the host preempts advances its coarse
     * clock two ticks at once (under a CPU hog on a 2-vCPU guest, half the
     * steps of a 4 ms coarse clock, for 100 ms at a stretch).  So a clock
     * that moves only a few times in the window (a 4 ms coarse clock: ~6)
     * is watched for 8 changes, up to 6 windows (seconds-clocks: one). */
    const double longest = s->unit == UNIT_S ? window_ns : 6 * window_ns;
    int64_t start = mono_raw_ns();
    int64_t prev = s->read(s->arg), best = INT64_MAX;
    for (uint64_t i = 1;; i++) {
        int64_t v = s->read(s->arg);
        if (v != prev) {
            if (v > prev && v - prev < best)
                best = v - prev;
            s->step_changes++;
            prev = v;
            if (s->step_changes >= 64)
                break;
        }
        if ((i & 63) == 0) {
            double elapsed = (double)(mono_raw_ns() - start);
            if (elapsed > longest || (elapsed > window_ns && s->step_changes >= 8))
                break;
        }
    }
    if (best == INT64_MAX)
        return;
    s->step_native = (double)best;
    switch (s->unit) {
    case UNIT_TICKS: s->step_ns = ticks_hz > 0 ? (double)best * 1e9 / ticks_hz : NAN; break;
    case UNIT_US: s->step_ns = (double)best * 1e3; break;
    case UNIT_S: s->step_ns = (double)best * 1e9; break;
    default: s->step_ns = (double)best; break;
    }
}

/* ---- thread scaling ----------------------------------------------------- */

struct scale_run;

struct scale_worker {
    pthread_t thread;
    struct source *src;
    struct scale_run *run;
    int cpu;
    uint64_t chunk;
    double run_ns;
    uint64_t calls;
    int64_t elapsed, cpu_ns;
    uint64_t acc;
};

/* On the heap, with the workers: a worker that never got its CPU (a
 * real-time task busy there) is left behind with it, and may run later. */
struct scale_run {
    _Atomic int ready, go, abandoned;
    struct scale_worker w[];
};

/* How long the workers may take to start, together. */
#define SCALE_START_NS 2000000000LL

static void *scale_main(void *arg)
{
    struct scale_worker *w = arg;
    if (w->cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(w->cpu, &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    atomic_fetch_add(&w->run->ready, 1);
    while (!atomic_load(&w->run->go))
        sched_yield();
    if (atomic_load(&w->run->abandoned))
        return NULL; /* the source may be gone by now */
    int64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    int64_t t0 = mono_raw_ns(), t1;
    do {
        w->acc += w->src->loop(w->chunk, w->src->arg);
        w->calls += w->chunk;
        t1 = mono_raw_ns();
    } while ((double)(t1 - t0) < w->run_ns);
    w->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    w->elapsed = t1 - t0;
    return NULL;
}

int src_scale(struct source *s, int threads, const int *cpus, int ncpus, double run_ns, struct scale_sample *out)
{
    if (!s->usable || threads < 1)
        return -1;
    if (s->n == 0)
        calibrate(s, 1e6);
    struct scale_run *r = calloc(1, sizeof *r + (size_t)threads * sizeof r->w[0]);
    if (!r)
        return -1;
    struct scale_worker *w = r->w;
    int started = 0;
    for (int i = 0; i < threads; i++) {
        w[i].src = s;
        w[i].run = r;
        w[i].cpu = ncpus > 0 ? cpus[i % ncpus] : -1;
        /* Chunks of ~50 us keep the overshoot past run_ns small. */
        w[i].chunk = s->n / 20 ? s->n / 20 : 1;
        w[i].run_ns = run_ns;
        if (pthread_create(&w[i].thread, NULL, scale_main, &w[i]) != 0)
            break;
        started++;
    }
    int64_t deadline = mono_raw_ns() + SCALE_START_NS;
    while (atomic_load(&r->ready) < started && mono_raw_ns() < deadline)
        sched_yield();
    if (atomic_load(&r->ready) < started) {
        /* A worker never started: this point is not measured, and the
         * workers are left behind with their block, not waited for. */
        atomic_store(&r->abandoned, 1);
        atomic_store(&r->go, 1);
        for (int i = 0; i < started; i++)
            pthread_detach(w[i].thread);
        return SRC_SCALE_STUCK;
    }
    atomic_store(&r->go, 1);
    for (int i = 0; i < started; i++)
        pthread_join(w[i].thread, NULL);
    int ok = started == threads;
    double wall = 0, per = 0;
    for (int i = 0; i < started; i++) {
        sink += w[i].acc;
        if (w[i].calls == 0 || w[i].elapsed <= 0 || w[i].cpu_ns <= 0) {
            ok = 0;
            continue;
        }
        wall += (double)w[i].calls * 1e9 / (double)w[i].elapsed;
        per += (double)w[i].cpu_ns / (double)w[i].calls;
    }
    free(r);
    if (!ok)
        return -1;
    out->ns_per_call = per / threads;
    out->calls_per_s = (threads < ncpus || ncpus < 1 ? threads : ncpus) * 1e9 / out->ns_per_call;
    out->wall_calls_per_s = wall;
    return 0;
}

int src_allowed_cpus(int *cpus, int max)
{
    cpu_set_t set;
    int n = 0;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    for (int i = 0; i < CPU_SETSIZE && n < max; i++)
        if (CPU_ISSET(i, &set))
            cpus[n++] = i;
    return n;
}
