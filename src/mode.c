/*
 * Mode decision.  Runs once, lazily, on the first read from any thread, and
 * answers one question: can the counter be trusted?  It costs two CPUIDs,
 * one sysfs file and one calibration sample (~15 us in a VM, where each
 * CPUID and each file read traps).  Readers that arrive while it runs, and
 * until the first line is published, get the kernel's clocks; the first line
 * starts at or above those values so nothing goes backwards.
 *
 * mode tsc needs all of:
 *   - an invariant TSC (CPUID 0x80000007 EDX[8]);
 *   - the kernel's trust: "tsc" listed in available_clocksource (the kernel
 *     hides a clocksource its watchdog or its boot-time sync check marked
 *     unstable) -- the kernel need not *use* it: on Xen/HPET/kvm-clock
 *     machines this is where fastclock helps most;
 *   - a calibration that converges, a counter that never goes backwards,
 *   - and a first calibration sample that makes sense.
 * Cost plays no part in the mode: which instruction reads the counter, and
 * whether ordered reads go to a clearly cheaper kernel clock, is chosen
 * with the first line (calibration.c, fc_counter_choose).
 * Where the list is unfiltered (jiffies listed: the tick is not in one-shot
 * mode, and the kernel then lists an unstable counter too), only the
 * clocksource the kernel uses counts as trusted.  FASTCLOCK_MODE=tsc
 * tolerates an unreadable sysfs or an unfiltered list, but still refuses a
 * non-invariant or distrusted TSC.
 */
#define _GNU_SOURCE
#include "mode.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "calibration.h"
#include "cpu.h"
#include "fmt.h"
#include "kernel.h"
#include "percpu.h"
#include "sync.h"
#include "upkeep.h"
#include "wall.h"

_Atomic int fc_mode;

/* Mode system decided at start-up: nothing was ever served from the
 * counter, so reads go straight to the kernel, unclamped (clock.c), and the
 * preload shim may hand calls to libc. */
static _Atomic int system_at_start;

enum fc_mode_pref { PREF_AUTO, PREF_TSC, PREF_PERCPU, PREF_SYSTEM };
/* The mode each preference asks for (auto: none). */
static const int pref_mode[] = {[PREF_AUTO] = -1, [PREF_TSC] = FC_MODE_TSC, [PREF_PERCPU] = FC_MODE_PERCPU,
                                [PREF_SYSTEM] = FC_MODE_SYSTEM};

static _Atomic int mode_forced;
static enum fc_mode_pref decided_pref; /* what FASTCLOCK_MODE asked of the decision (decide's) */
static _Atomic int calibrator_pref = -1;
static _Atomic int default_unordered;

/* fastclock_ticks(): its unit is fixed by the first decision for the whole
 * process.  Counter ticks wherever a counter was trusted at start (raw while
 * mode tsc lasts; afterwards synthesised from MONOTONIC at the last rate,
 * starting above every raw value handed out); ns of MONOTONIC otherwise. */
_Atomic int fc_ticks_raw;            /* read by fastclock_ticks' fast path */
_Atomic int fc_ticks_in_ns;             /* ticks count ns of the kernel's MONOTONIC (not tsc at the decision) */
_Atomic(fc_direct_fn) fc_ticks_direct;  /* ... read here */
/* The unit, fixed once: by the decision, or before it by a ticks read that
 * could not wait for it (a signal handler on the deciding thread, a
 * decision over 100 ms late), which fixes ns (fc_ticks_before_decision). */
enum { TICKS_OPEN, TICKS_COUNTER, TICKS_NS };
static _Atomic int ticks_unit;
static _Atomic int ticks_synth;
static _Atomic uint64_t synth_base_t, synth_tpn; /* ticks per ns << 32 */
static _Atomic int64_t synth_base_mono;

/* Reasons are copied into slots that are never rewritten, so a pointer
 * handed out by fastclock_status stays valid and unchanged. */
#define REASON_SLOTS 16
static char reason_slots[REASON_SLOTS][512] FC_LARGE_BSS; /* as long as the buffers reasons are built in */
static _Atomic int reason_used;
static _Atomic(const char *) reason_ptr;

static void set_reason(const char *reason)
{
    int i = atomic_fetch_add_explicit(&reason_used, 1, memory_order_relaxed);
    if (i >= REASON_SLOTS) {
        atomic_store_explicit(&reason_ptr, "the mode changed too often to keep every reason; "
                                           "the latest one was dropped", memory_order_release);
        return;
    }
    struct fc_buf b;
    fc_buf_init(&b, reason_slots[i], sizeof reason_slots[i]);
    fc_buf_str(&b, reason);
    atomic_store_explicit(&reason_ptr, reason_slots[i], memory_order_release);
}

const char *fc_get_reason(void)
{
    const char *r = atomic_load_explicit(&reason_ptr, memory_order_acquire);
    if (r)
        return r;
    return atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_UNINIT
               ? "not decided yet: no clock has been read"
               : "being decided: another thread is choosing the mode";
}

int fc_system_from_start(void)
{
    return atomic_load_explicit(&system_at_start, memory_order_acquire);
}

/*
 * tsc-percpu trusts each CPU's counter, but a per-CPU read costs more than
 * a global line's: rdtscp, the slot of the CPU it names, the per-thread
 * clamp.  Where the kernel's own clocksource is the TSC (a guest whose
 * vCPUs' counters drift apart under a kernel that keeps tsc), its vDSO read
 * is the global line's work -- the counter, a seqlock, a multiply -- a
 * subset of the per-CPU read's, and so the cheaper read: measured on an
 * Intel guest, the per-CPU read costs 1.15-1.27x the vDSO (the kernel's
 * read 0.90-0.94x the per-CPU one in the process's own paired timing, too
 * close to any margin for a timed decision to come out the same in every
 * process; this one does, by construction).  There the kernel answers the
 * fine clocks: the mode says what can be trusted, the cost picks the path
 * (the wall clocks' ordered reads too: fc_mode_enter arms the vDSO route
 * that wall.c fc_wall_choose made a candidate from the same fact).  Decided
 * with the mode, before any per-CPU value is served;
 * never for FASTCLOCK_MODE=percpu, which asks for the per-CPU lines
 * themselves, nor for a simulated machine (the test seam says).  Both fine
 * flavours go: a per-CPU read is rdtscp either way (it must name the CPU),
 * so the unordered one costs what the ordered one does; the coarse clocks
 * stay in memory, where the ticker serves them for a load.
 */
_Atomic int fc_percpu_kernel;             /* 1: the kernel answers tsc-percpu's fine clocks */
static _Atomic int kernel_at_start;       /* fine reads went to the kernel from the decision on */
static _Atomic int kernel_reads_counter;  /* at the decision: the kernel's clocksource is the counter */

/*
 * tsc-percpu's wall clocks, where the per-CPU lines answer the fine reads:
 * a wall read is then a per-CPU MONOTONIC read plus the offset check (a
 * second vDSO call, wall.h), while the kernel's REALTIME costs just what its
 * MONOTONIC does.  Where the kernel's clock answers in user space -- its
 * vDSO reads a counter: kvm-clock, a Hyper-V TSC page -- that is less than
 * ours: measured on an Intel guest with kvm-clock, the per-CPU REALTIME cost
 * 1.13-1.16x libc's, gettimeofday 1.29x.  There the kernel answers the wall
 * clocks.  Where its vDSO makes a system call (hpet, acpi_pm, a pvclock the
 * host does not mark stable) the lines answer: 5-50x cheaper.  Told apart
 * by the kernel's read over rdtscp, timed at the decision: 1.2-1.6 in user
 * space, 5 or more through a system call; the threshold sits in the gap, far
 * from both, so every process decides the same.  Where the kernel's
 * clocksource is the counter itself, tsc-percpu from the decision sends the
 * ordered wall reads to it (fc_mode_enter: fc_wall_take_direct); after a
 * switch from mode tsc they stay where mode tsc's timing put them (counter.c
 * wall_choose): the vDSO, or MONOTONIC as this mode reads it -- held at the
 * switch floor, then the kernel's where it answers the fine reads -- plus
 * the offset.  A switch from mode tsc takes this route once the kernel has
 * passed the switch floor (clock.c percpu_wall_read).
 */
#define PERCPU_WALL_KERNEL_MAX 2.5

/* The test seam simulates the counter or the kernel: the lines are under
 * test, and no path is chosen for cost. */
static int machine_simulated(void)
{
    return fc_seam.counter || fc_seam.counter_aux || fc_seam.kernel_gettime;
}
_Atomic int fc_percpu_wall_kernel; /* 1: the kernel answers tsc-percpu's wall clocks */

static void choose_percpu_wall(int fine_to_kernel, struct fc_buf *b)
{
    int to_kernel = 0;
    double ratio = 0;
    if (fc_seam.percpu_wall_route != 0)
        to_kernel = fc_seam.percpu_wall_route > 0;
    else if (!fine_to_kernel && !atomic_load_explicit(&kernel_reads_counter, memory_order_relaxed) &&
             !machine_simulated()) {
        ratio = fc_counter_kernel_over_rdtscp(2 * PERCPU_WALL_KERNEL_MAX);
        to_kernel = ratio > 0 && ratio < PERCPU_WALL_KERNEL_MAX;
    }
    atomic_store_explicit(&fc_percpu_wall_kernel, to_kernel, memory_order_release);
    if (to_kernel) {
        fc_buf_str(b, "; the kernel's clock answers the wall clocks: it reads in user space");
        if (ratio > 0) {
            fc_buf_str(b, " (");
            fc_buf_fixed(b, ratio, 1);
            fc_buf_str(b, "x rdtscp)");
        }
        fc_buf_str(b, ", for less than a per-CPU read plus the offset check");
    }
}

/* Chooses, and says so after the mode's reason in b. */
static void choose_percpu_kernel(int forced, struct fc_buf *b)
{
    int to_kernel;
    if (fc_seam.percpu_route != 0)
        to_kernel = fc_seam.percpu_route > 0;
    else if (forced || machine_simulated())
        to_kernel = 0;
    else
        to_kernel = atomic_load_explicit(&kernel_reads_counter, memory_order_relaxed);
    atomic_store_explicit(&fc_percpu_kernel, to_kernel, memory_order_release);
    if (to_kernel)
        fc_buf_str(b, "; the kernel's clock answers the fine reads: its clocksource is the counter, "
                      "which its vDSO reads with less work than a per-CPU read");
    choose_percpu_wall(to_kernel, b);
}

int fc_kernel_from_start(void)
{
    return atomic_load_explicit(&kernel_at_start, memory_order_acquire);
}

int fc_mode_forced(void)
{
    return atomic_load_explicit(&mode_forced, memory_order_relaxed);
}

void fc_set_default_unordered(int unordered)
{
    atomic_store_explicit(&default_unordered, unordered, memory_order_relaxed);
}

int fc_default_unordered(void)
{
    return atomic_load_explicit(&default_unordered, memory_order_relaxed);
}

/* A value from the environment as the messages echo it: at most 40 bytes,
 * "..." after a longer one, so that what follows it is never cut; control
 * characters as '?', so that a terminal never obeys one. */
const char *fc_env_echo(const char *v, char *out, size_t size)
{
    size_t n = strlen(v), keep = n > 40 ? 40 : n;
    if (size < 44)
        return "(value not shown)";
    memcpy(out, v, keep);
    memcpy(out + keep, n > keep ? "..." : "", n > keep ? 4 : 1);
    for (char *q = out; *q; q++)
        if ((unsigned char)*q < 0x20 || *q == 0x7f)
            *q = '?';
    return out;
}

void fc_env_ignored(const char *name, const char *v, const char *rule)
{
    char msg[512], shown[48];
    struct fc_buf buf;
    fc_buf_init(&buf, msg, sizeof msg);
    fc_buf_str(&buf, "fastclock: ignoring ");
    fc_buf_str(&buf, name);
    fc_buf_str(&buf, "=");
    fc_buf_str(&buf, fc_env_echo(v, shown, sizeof shown));
    fc_buf_str(&buf, ": ");
    fc_buf_str(&buf, rule);
    fc_buf_str(&buf, "\n");
    ssize_t r = write(2, msg, buf.len);
    (void)r;
}

/* b (lower-case) in a, ignoring ASCII case and blanks around it.  ASCII
 * only, not strncasecmp, which folds by the locale's table: a setting's
 * meaning must not depend on the program's locale, and that table costs a
 * process a page fault at start-up, when this runs. */
int fc_env_word(const char *a, const char *b)
{
    while (*a == ' ' || *a == '\t') a++;
    for (; *b; a++, b++)
        if ((*a >= 'A' && *a <= 'Z' ? *a + ('a' - 'A') : *a) != *b)
            return 0;
    while (*a == ' ' || *a == '\t') a++;
    return *a == 0;
}

int fc_env_flag(const char *v)
{
    if (fc_env_word(v, "") || fc_env_word(v, "0") || fc_env_word(v, "no") || fc_env_word(v, "false"))
        return 0;
    if (fc_env_word(v, "1") || fc_env_word(v, "yes") || fc_env_word(v, "true"))
        return 1;
    return -1;
}

/* What FASTCLOCK_MODE's value v asks for; -1 for a value that names no
 * mode (NULL or blank: auto). */
static enum fc_mode_pref mode_env_pref(const char *v)
{
    if (!v || fc_env_word(v, "") || fc_env_word(v, "auto"))
        return PREF_AUTO;
    if (fc_env_word(v, "tsc"))
        return PREF_TSC;
    if (fc_env_word(v, "system"))
        return PREF_SYSTEM;
    if (fc_env_word(v, "percpu") || fc_env_word(v, "tsc-percpu"))
        return PREF_PERCPU;
    return -1;
}

/* FASTCLOCK_MODE as the library's constructor found it (fc_mode_read_env),
 * with secure_getenv: a setuid or setgid program that links the library
 * ignores FASTCLOCK_* (and is never told about it on stderr).  A value that
 * names no mode is reported once on stderr, when it is read, and left in
 * *ignored for the status's reason (NULL otherwise).  Read there, not at the decision:
 * the decision may run in a signal handler, or beside a thread's setenv,
 * where reading the environment is not safe.  The value is kept clipped,
 * for the reason; env_read 0: not read yet (a clock read by another
 * library's constructor, before ours: read then). */
static _Atomic int env_read;
static enum fc_mode_pref env_pref;
static char env_ignored[48];

void fc_mode_read_env(void)
{
    static _Atomic int warned;
    const char *v = secure_getenv("FASTCLOCK_MODE");
    int p = mode_env_pref(v);
    env_ignored[0] = 0;
    if (p < 0) {
        fc_env_echo(v, env_ignored, sizeof env_ignored);
        p = PREF_AUTO;
        /* Said here, when the library loads (as FASTCLOCK_CALIBRATOR's is),
         * not at the decision: that may come late in a daemon that has
         * since given descriptor 2 to a file or a socket, inside a signal
         * handler, or never in a process that reads the time rarely. */
        if (!atomic_exchange(&warned, 1))
            fc_env_ignored("FASTCLOCK_MODE", v, "it must be auto, tsc, percpu (or tsc-percpu) or system; using auto");
    }
    env_pref = (enum fc_mode_pref)p;
    atomic_store_explicit(&env_read, 1, memory_order_release);
}

void fc_mode_env_at_load(void)
{
    if (!atomic_load_explicit(&env_read, memory_order_acquire))
        fc_mode_read_env();
}

static enum fc_mode_pref parse_mode_env(const char **ignored)
{
    fc_mode_env_at_load(); /* not read yet: a clock read by another library's constructor */
    *ignored = env_ignored[0] ? env_ignored : 0;
    return env_pref;
}

enum fc_calibrator_pref fc_calibrator_pref(void)
{
    int p = atomic_load_explicit(&calibrator_pref, memory_order_relaxed);
    if (p >= 0)
        return (enum fc_calibrator_pref)p;
    const char *v = secure_getenv("FASTCLOCK_CALIBRATOR");
    p = FC_CAL_AUTO;
    if (v && fc_env_word(v, "thread"))
        p = FC_CAL_THREAD;
    else if (v && fc_env_word(v, "lazy"))
        p = FC_CAL_LAZY;
    else if (v && !fc_env_word(v, "") && !fc_env_word(v, "auto")) {
        fc_env_ignored("FASTCLOCK_CALIBRATOR", v, "it must be auto, thread or lazy; using auto");
    }
    atomic_store_explicit(&calibrator_pref, p, memory_order_relaxed);
    return (enum fc_calibrator_pref)p;
}

void fc_decide_now(void)
{
    if (atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_UNINIT)
        fc_try_init();
    fc_wait_decided();
}

/* ---- the one writer of the mode ---------------------------------------- */

/* A moment on the decision's timeline: a counter read and MONOTONIC then. */
struct moment {
    uint64_t t;
    int64_t mono;
};

/* The first line failed (no rate measured) after raw ticks were handed
 * out: the counter's frequency from CPUID (a dozen CPUIDs: this happens
 * once, on the way to mode system), else from the decision's sample to
 * `at` (NULL: now), else 1 ns per tick (the interval across is then wrong,
 * and there was nothing better to go on). */
static double rate_without_a_line(const struct moment *at)
{
    struct fc_cpu_info cpu;
    if (fc_seam.cpu)
        cpu = *fc_seam.cpu;
    else
        fc_cpu_probe(&cpu);
    if (cpu.tsc_hz > 1e6 && cpu.tsc_hz < 1e11)
        return 1e9 / cpu.tsc_hz;
    const struct fc_sample *s0 = &fc_global_track.cs->decided;
    if (s0->width != 0) {
        /* The fresh end's bracket is one counter read and one kernel read
         * (here, maybe slow ones: its width is taken as the sample's too);
         * 100 widths of baseline for ~1%. */
        uint64_t t, t_end;
        int64_t mono;
        if (at) { /* given: a fork child's parent, on the decision's timeline */
            t = t_end = at->t;
            mono = at->mono;
        } else {
            t = fc_now_counter(1);
            mono = fc_kernel_ns(CLOCK_MONOTONIC);
            t_end = fc_now_counter(1);
        }
        uint64_t widths = s0->width + (t_end - t);
        if (t > s0->t && t - s0->t > 100 * widths && mono > s0->mono) {
            double r = (double)(mono - s0->mono) / (double)(t - s0->t);
            if (r > 0.01 && r < 1000.0)
                return r;
        }
    }
    return 1.0;
}

/* Fixes the unit at `want` unless it is fixed already; returns the unit. */
static int fix_ticks_unit(int want)
{
    int unit = TICKS_OPEN;
    if (atomic_compare_exchange_strong_explicit(&ticks_unit, &unit, want, memory_order_acq_rel,
                                                memory_order_acquire))
        return want;
    return unit;
}

/* Ticks in ns of the kernel's MONOTONIC, one vDSO call each, for the life
 * of the process (tsc-percpu's own read costs more: 1.23x libc, measured). */
static void ticks_in_ns(void)
{
    atomic_store_explicit(&fc_ticks_raw, 0, memory_order_relaxed);
    atomic_store_explicit(&fc_ticks_in_ns, 1, memory_order_relaxed);
    /* Not where they are synthesised already (a fork child re-based them
     * on a new time namespace's timeline): the kernel's MONOTONIC is not
     * theirs any more. */
    if (!atomic_load_explicit(&ticks_synth, memory_order_acquire))
        atomic_store_explicit(&fc_ticks_direct, fc_refclock_answering(), memory_order_release);
}

uint64_t fc_ticks_before_decision(void)
{
    if (fix_ticks_unit(TICKS_NS) == TICKS_NS) {
        if (!atomic_load_explicit(&fc_ticks_direct, memory_order_acquire))
            ticks_in_ns();
        fc_direct_fn direct = atomic_load_explicit(&fc_ticks_direct, memory_order_acquire);
        struct timespec ts;
        if (direct && direct(CLOCK_MONOTONIC, &ts) == 0)
            return (uint64_t)fc_ts_to_ns(&ts);
        return fc_ticks_synth(fc_kernel_ns(CLOCK_MONOTONIC)); /* ns, or re-based ns */
    }
    /* Counter ticks: a decision for tsc fixed them a moment ago, and is
     * about to say so. */
    return fc_now_counter(0);
}

/* Synthesised ticks from now on: base_t at MONOTONIC base_mono, tpn ticks
 * per ns << 32 (fc_ticks_synth). */
static void synthesise_ticks(uint64_t base_t, int64_t base_mono, uint64_t tpn)
{
    atomic_store_explicit(&synth_base_t, base_t, memory_order_relaxed);
    atomic_store_explicit(&synth_base_mono, base_mono, memory_order_relaxed);
    atomic_store_explicit(&synth_tpn, tpn, memory_order_relaxed);
    atomic_store_explicit(&ticks_synth, 1, memory_order_release);
}

/* Ticks keep their unit when the mode leaves tsc: from here on they are
 * synthesised from MONOTONIC at the last rate, starting above the raw values
 * threads may have read: the counter now, plus the largest warp the check
 * measured (a lower bound of the real one; none where the kernel dropped the
 * TSC unmeasured), plus a millisecond for reads that raced this switch and
 * for warps below that.  A larger unmeasured warp is not covered (fastclock.h). */
static void ticks_leave_raw(int64_t floor_ns, const struct moment *at)
{
    if (atomic_load_explicit(&fc_ticks_in_ns, memory_order_relaxed) ||
        atomic_load_explicit(&ticks_synth, memory_order_relaxed))
        return;
    struct fc_cal_stats st;
    fc_cal_stats(&st);
    double rate = st.rate_ns_per_tick > 0 ? st.rate_ns_per_tick : fc_percpu_seed_rate();
    if (!(rate > 0))
        rate = rate_without_a_line(at);
    struct fc_percpu_stats ps;
    fc_percpu_stats(&ps);
    uint64_t margin = (uint64_t)(1e6 / rate) + (ps.max_warp_cycles > 0 ? (uint64_t)ps.max_warp_cycles : 0);
    int64_t mono = fc_kernel_ns(CLOCK_MONOTONIC);
    if (mono < floor_ns)
        mono = floor_ns;
    fc_cal_set_ticks_rate(rate);
    synthesise_ticks(fc_now_counter(1) + margin, mono, (uint64_t)((double)((uint64_t)1 << 32) / rate));
}

void fc_mode_enter(int mode, const char *reason, int64_t floor_ns)
{
    int old = atomic_load_explicit(&fc_mode, memory_order_relaxed);
    set_reason(reason);
    if (mode == FC_MODE_TSC) {
        /* Counter ticks -- unless a read before the decision fixed ns. */
        if (fix_ticks_unit(TICKS_COUNTER) == TICKS_COUNTER)
            atomic_store_explicit(&fc_ticks_raw, !fc_seam.counter, memory_order_relaxed);
        else
            ticks_in_ns();
    } else {
        int at_start = old == FC_MODE_INITIALIZING;
        /* At the decision only: after a switch from mode tsc the unordered
         * wall reads were the global line's, which may lead the kernel by
         * its error; they stay MONOTONIC (held at the switch floor) plus
         * the offset until the kernel has passed the floor (clock.c
         * percpu_kernel_read), or the per-CPU lines answer them. */
        if (mode == FC_MODE_PERCPU && floor_ns == 0) {
            fc_wall_take_direct(); /* the kernel's clock reads the counter: its REALTIME is cheaper */
            fc_wall_enter_percpu();
            if (atomic_load_explicit(&fc_percpu_wall_kernel, memory_order_relaxed))
                fc_wall_to_kernel(fc_refclock_answering()); /* both flavours, gettimeofday too */
        }
        atomic_store_explicit(&fc_ticks_raw, 0, memory_order_relaxed);
        if (at_start && fix_ticks_unit(TICKS_NS) == TICKS_NS) {
            /* No raw tick was ever handed out. */
            ticks_in_ns();
        } else {
            ticks_leave_raw(floor_ns, 0);
        }
        fc_cal_publish_system(floor_ns);
        if (at_start && mode == FC_MODE_SYSTEM)
            atomic_store_explicit(&system_at_start, 1, memory_order_release);
        if (at_start && (mode == FC_MODE_SYSTEM || atomic_load_explicit(&fc_percpu_kernel, memory_order_relaxed)))
            atomic_store_explicit(&kernel_at_start, 1, memory_order_release);
    }
    /* "forced": FASTCLOCK_MODE chose this mode -- not where it was refused,
     * nor once a fail-safe or a fork has left it.  Before the mode's store,
     * whose readers read it after. */
    atomic_store_explicit(&mode_forced, pref_mode[decided_pref] == mode, memory_order_relaxed);
    atomic_store_explicit(&fc_mode, mode, memory_order_release);
    fc_upkeep_wake();
}

/* With the lock held: the global track's recalibration, and what follows a
 * failure (calibration says why; the mode leaves tsc for good, its floor
 * above anything the line returned). */
static void switch_to_percpu_locked(const char *why);

static int recalibrate_locked(void);

/* Readers call this inside a read (the lazy calibrator, a line run out), and
 * what it may do -- a switch to per-CPU lines sets them up with
 * sched_getcpu and mmap -- must not show in their errno. */
int fc_mode_recalibrate(void)
{
    int saved = errno;
    int r = recalibrate_locked();
    errno = saved;
    return r;
}

static int recalibrate_locked(void)
{
    /* Checked again under the lock: a caller that saw mode tsc may have
     * been preempted while the holder before it left tsc, and a global line
     * published now would serve values below what was already served. */
    if (atomic_load_explicit(&fc_mode, memory_order_acquire) != FC_MODE_TSC)
        return FC_RECAL_SKIPPED;
    int r = fc_cal_recalibrate();
    if (r == FC_RECAL_FAILED)
        fc_mode_fail_to_system(fc_cal_failure_reason());
    if (r == FC_RECAL_WARP) {
        int a, b;
        int64_t cycles = fc_cal_lazy_warp(&a, &b);
        char why[256];
        struct fc_buf w;
        fc_buf_init(&w, why, sizeof why);
        fc_buf_str(&w, "the TSCs of CPU ");
        fc_buf_i64(&w, a);
        fc_buf_str(&w, " and CPU ");
        fc_buf_i64(&w, b);
        fc_buf_str(&w, " disagree by ");
        fc_buf_i64(&w, cycles);
        fc_buf_str(&w, " cycles (the lazy calibrator's samples on each)");
        switch_to_percpu_locked(why);
    }
    return r;
}

void fc_mode_fail_to_system(const char *reason)
{
    fc_mode_enter(FC_MODE_SYSTEM, reason, fc_cal_global_ceiling());
    fc_cal_global_ceiling_done();
}

/*
 * A child forked after unshare(CLONE_NEWTIME) lives in the new time
 * namespace: its CLOCK_MONOTONIC and CLOCK_BOOTTIME are the parent's plus
 * the namespace's offsets (seconds to days), its REALTIME the same.  The
 * lines, the floors and the per-thread clamps it inherited are on the
 * parent's timeline -- left as they were, its reads ran an hour ahead of the
 * kernel for seconds, or held an hour behind, then failed to system with
 * "the counter's rate keeps changing" (measured, +-3600 s).  Here the
 * child is its only thread, before fork returns: it forgets every MONOTONIC
 * value it holds -- fallback floors, the line and its BOOTTIME offset, the
 * per-CPU floor and clamp, adjtimex poll times, wall offsets, the coarse
 * floor (calibrator.c) -- and lets the kernel answer from now on (mode
 * system, no floor), as libc's clock would: the new namespace's time from
 * the first read.  An undecided child keeps only the mode-independent
 * forgetting; it decides on its own timeline.  Ticks go on from the
 * parent's timeline in their unit: raw ones through ticks_leave_raw,
 * synthesised ones re-based at their value at the fork, and ticks that were
 * the kernel's MONOTONIC synthesised from now on, one per ns.  Not where the
 * fork came from a handler that interrupted a calibration on this thread
 * (the lock is held): that child stays on the old lines.  A process that
 * enters a time namespace itself (setns, single-threaded) is not seen.
 */
int fc_mode_after_timens_change(uint64_t parent_t, int64_t parent_mono)
{
    int saved = errno;
    /* Whatever the mode: adjtimex's poll times (a lazy process polls for
     * fastclock_real_bounded before any decision) and this thread's wall
     * offsets. */
    fc_sync_forget();
    fc_wall_forget_offsets();
    int mode = atomic_load_explicit(&fc_mode, memory_order_acquire);
    int undecided = mode != FC_MODE_TSC && mode != FC_MODE_PERCPU && mode != FC_MODE_SYSTEM;
    if (undecided || !fc_cal_trylock()) {
        /* Undecided: the child decides on its own timeline.  Decided, with
         * the lock held by the handler that forked: the child stays on the
         * parent's lines.  Either way ticks in ns of the kernel's MONOTONIC
         * (a read that could not wait for the decision fixed ns) go on from
         * the parent's value, one per ns: of the child's own MONOTONIC
         * where it will decide, of the MONOTONIC its lines give where it
         * stays on them (the kernel's is the new namespace's now). */
        if (atomic_load_explicit(&fc_ticks_in_ns, memory_order_relaxed) &&
            !atomic_load_explicit(&ticks_synth, memory_order_relaxed)) {
            synthesise_ticks((uint64_t)parent_mono, undecided ? fc_kernel_ns(CLOCK_MONOTONIC) : parent_mono,
                             (uint64_t)1 << 32);
            atomic_store_explicit(&fc_ticks_direct, (fc_direct_fn)0, memory_order_release);
        }
        errno = saved;
        return 0;
    }
    int64_t now = fc_kernel_ns(CLOCK_MONOTONIC);
    if (atomic_load_explicit(&fc_ticks_raw, memory_order_relaxed)) {
        /* Raw ticks: synthesised from here on, at a rate measured on the
         * parent's timeline (the child's MONOTONIC would skew it by the
         * namespace's offset). */
        struct moment at = {parent_t, parent_mono};
        ticks_leave_raw(0, &at);
    } else if (atomic_load_explicit(&ticks_synth, memory_order_relaxed)) {
        synthesise_ticks(fc_ticks_synth(parent_mono), now, atomic_load_explicit(&synth_tpn, memory_order_relaxed));
    } else if (atomic_load_explicit(&fc_ticks_in_ns, memory_order_relaxed)) {
        /* Ticks were the kernel's MONOTONIC itself: from now on synthesised,
         * one per ns, going on from the parent's value at the fork. */
        synthesise_ticks((uint64_t)parent_mono, now, (uint64_t)1 << 32);
        atomic_store_explicit(&fc_ticks_direct, (fc_direct_fn)0, memory_order_release);
    }
    fc_cal_forget_timeline();
    fc_percpu_forget_floors();
    fc_mode_enter(FC_MODE_SYSTEM,
                  "this process was forked into a new time namespace (unshare(CLONE_NEWTIME)), whose "
                  "CLOCK_MONOTONIC is not the one its lines were calibrated on: the kernel's clocks answer",
                  0);
    fc_cal_unlock();
    errno = saved;
    return 1;
}

/* A warp check found the CPUs' counters apart: one line per CPU from now on,
 * or, if that is impossible, the kernel's clocks.  With the lock held. */
static void switch_to_percpu_locked(const char *why)
{
    char msg[512], setup_why[256];
    struct fc_buf b;
    fc_buf_init(&b, msg, sizeof msg);
    fc_buf_str(&b, why);
    if (atomic_load_explicit(&fc_mode, memory_order_acquire) != FC_MODE_TSC)
        return;
    int ok = fc_percpu_setup(setup_why, sizeof setup_why) == 0;
    if (!ok) {
        fc_buf_str(&b, ", and per-CPU calibration is not possible: ");
        fc_buf_str(&b, setup_why);
    } else {
        fc_buf_str(&b, ": each CPU's counter is calibrated separately");
    }
    if (ok)
        choose_percpu_kernel(0, &b); /* before the ceiling: it times reads, and fallbacks are held meanwhile */
    /* Readers of the global line got at most its ceiling: per-CPU reads start no lower. */
    int64_t ceiling = fc_cal_global_ceiling();
    if (fc_seam.writer_step)
        fc_seam.writer_step("switching"); /* (a test forks here, from another thread) */
    if (ok) {
        fc_percpu_set_floor(ceiling);
        fc_mode_enter(FC_MODE_PERCPU, msg, ceiling);
    } else {
        fc_mode_enter(FC_MODE_SYSTEM, msg, ceiling);
    }
    fc_cal_global_ceiling_done();
}

void fc_mode_after_lost_switch(int64_t floor_ns)
{
    /* Still tsc: the switch had not reached its mode store.  Left so, the
     * child's readers would build a first line again on a "no line" the
     * switch may have published, below the floor its parent's reads reached. */
    if (atomic_load_explicit(&fc_mode, memory_order_acquire) != FC_MODE_TSC || !fc_cal_trylock())
        return;
    fc_mode_enter(FC_MODE_SYSTEM,
                  "this process was forked while another thread was moving it off the global line (a warp "
                  "between CPUs, or the kernel's distrust): the kernel's clocks answer",
                  floor_ns);
    fc_cal_unlock();
}

/* The calibrator thread's warp check (it takes the lock itself). */
int fc_mode_switch_to_percpu(const char *why)
{
    if (!fc_cal_trylock())
        return 0; /* a reader holds the lock for a moment: the caller tries again */
    switch_to_percpu_locked(why);
    fc_cal_unlock();
    return 1;
}

/* The decision found the kernel trusting the counter (fc_mode_recheck_kernel_trust):
 * KERNEL_LISTED, in its filtered list of clocksources; KERNEL_USES, as its
 * clocksource (listed too, in a list that may be unfiltered). */
#define KERNEL_LISTED 1
#define KERNEL_USES 2
static _Atomic int kernel_listed_counter;

int fc_mode_recheck_kernel_trust(void)
{
    if (atomic_load_explicit(&fc_mode, memory_order_acquire) != FC_MODE_TSC ||
        !atomic_load_explicit(&kernel_listed_counter, memory_order_relaxed))
        return 0;
    int saved = errno;
    struct fc_clocksource_info cs;
    fc_clocksource_read(fc_seam.sysroot ? fc_seam.sysroot : "", &cs);
    errno = saved;
    /* Unreadable now (a sandbox since): nothing learnt.  An unfiltered list
     * (a tick not in one-shot mode) keeps a counter the kernel marked
     * unstable, so its silence says nothing, and the sign is the kernel
     * moving off the counter it used (its watchdog does, at once; so does
     * an administrator's switch, which this cannot tell apart). */
    if (cs.available_errno)
        return 0;
    int unfiltered = fc_clocksource_list_unfiltered(cs.available);
    int left_list = !unfiltered && !fc_word_in_list(cs.available, FC_COUNTER_CLOCKSOURCE);
    int moved_off = unfiltered && !cs.current_errno && cs.current[0] &&
                    atomic_load_explicit(&kernel_listed_counter, memory_order_relaxed) == KERNEL_USES &&
                    strcmp(cs.current, FC_COUNTER_CLOCKSOURCE) != 0;
    if (!left_list && !moved_off)
        return 0;
    char why[256];
    struct fc_buf b;
    fc_buf_init(&b, why, sizeof why);
    fc_buf_str(&b, "the kernel stopped trusting the " FC_COUNTER_NAME " while this process ran: ");
    if (left_list) {
        fc_buf_str(&b, FC_COUNTER_CLOCKSOURCE " left the available clocksources (");
        fc_buf_str(&b, cs.available);
        fc_buf_str(&b, "), " FC_DISTRUST_HINT);
    } else {
        fc_buf_str(&b, "it moved to ");
        fc_buf_str(&b, cs.current);
        fc_buf_str(&b, " (as its watchdog does from a counter it marks unstable, which its unfiltered list "
                       "would still show; or someone switched it: the list cannot tell)");
    }
    if (!fc_mode_switch_to_percpu(why))
        return 0; /* a reader holds the lock for a moment: the next check */
    atomic_store_explicit(&kernel_listed_counter, 0, memory_order_relaxed);
    return 1;
}

/* ---- the decision -------------------------------------------------------- */

static void decide(void)
{
    char why[256], msg[512];
    struct fc_buf b;
    const char *ignored;
    enum fc_mode_pref pref = parse_mode_env(&ignored);
    atomic_store_explicit(&kernel_listed_counter, 0, memory_order_relaxed); /* this decision's, below */
    const char *refuse = pref == PREF_TSC      ? "FASTCLOCK_MODE=tsc refused: "
                         : pref == PREF_PERCPU ? "FASTCLOCK_MODE=percpu refused: "
                                               : "";
    decided_pref = pref;
    fc_buf_init(&b, msg, sizeof msg);
    if (ignored) {
        fc_buf_str(&b, "FASTCLOCK_MODE=");
        fc_buf_str(&b, ignored); /* as fc_env_echo showed it */
        fc_buf_str(&b, " ignored (it must be auto, tsc, percpu or system): ");
    }

    if (pref == PREF_SYSTEM) {
        fc_mode_enter(FC_MODE_SYSTEM, "FASTCLOCK_MODE=system asks for the kernel's clocks", 0);
        return;
    }

    struct fc_cpu_info cpu;
    if (fc_seam.cpu)
        cpu = *fc_seam.cpu;
    else
        fc_cpu_probe_trust(&cpu);
    if (!FC_HAVE_COUNTER || !cpu.has_tsc) {
        fc_buf_str(&b, refuse);
        fc_buf_str(&b, "this CPU has no time-stamp counter fastclock can read");
        fc_mode_enter(FC_MODE_SYSTEM, msg, 0);
        return;
    }
    if (!cpu.invariant_tsc) {
        fc_buf_str(&b, refuse);
        fc_buf_str(&b, "the CPU does not report an invariant TSC (CPUID 0x80000007 EDX bit 8), "
                       "so its rate may change with frequency and sleep states");
        fc_mode_enter(FC_MODE_SYSTEM, msg, 0);
        return;
    }
    fc_counter_order_early(); /* the samples from here on are ordered as the reads will be */

    struct fc_clocksource_info cs;
    fc_clocksource_read(fc_seam.sysroot ? fc_seam.sysroot : "", &cs);
    /* Where the kernel's own clock reads this counter, its REALTIME may cost
     * less than the line plus the offset check: a candidate, timed with the
     * first line (wall.h). */
    int reads_counter = strcmp(cs.current, FC_COUNTER_CLOCKSOURCE) == 0;
    atomic_store_explicit(&kernel_reads_counter, reads_counter, memory_order_relaxed);
    fc_wall_choose(reads_counter);
    const char *trust;
    char trustbuf[256];
    struct fc_buf tb;
    fc_buf_init(&tb, trustbuf, sizeof trustbuf);
    int distrusted = 0;
    if (cs.available_errno) {
        if (pref == PREF_AUTO) {
            fc_buf_str(&b, "cannot tell whether the kernel trusts the " FC_COUNTER_NAME ": " FC_CLOCKSOURCE_DIR
                           "/available_clocksource is unreadable (");
            fc_buf_str(&b, fc_errno_text(cs.available_errno));
            fc_buf_str(&b, "); set FASTCLOCK_MODE=tsc to use it anyway");
            fc_mode_enter(FC_MODE_SYSTEM, msg, 0);
            return;
        }
        trust = "the kernel's opinion of the " FC_COUNTER_NAME " is unknown (sysfs unreadable)";
    } else if (!fc_word_in_list(cs.available, FC_COUNTER_CLOCKSOURCE) &&
               (fc_word_in_list(cs.available, FC_COUNTER_CLOCKSOURCE "-early") ||
                strcmp(cs.current, FC_COUNTER_CLOCKSOURCE "-early") == 0)) {
        /* The first second or so of boot: the kernel runs on its early
         * registration of the counter and has not yet registered it for good
         * (after refining its rate, or not at all, should its checks fail).
         * Its trust is not decided yet -- not the distrust an absent name
         * means later. */
        if (pref == PREF_AUTO) {
            fc_buf_str(&b, "cannot tell yet whether the kernel trusts the " FC_COUNTER_NAME ": it still runs on "
                           "its early registration (" FC_COUNTER_CLOCKSOURCE "-early), as in the first second "
                           "after boot; set FASTCLOCK_MODE=tsc to use it anyway");
            fc_mode_enter(FC_MODE_SYSTEM, msg, 0);
            return;
        }
        trust = "the kernel's opinion of the " FC_COUNTER_NAME " is not decided yet (" FC_COUNTER_CLOCKSOURCE
                "-early)";
    } else if (!fc_word_in_list(cs.available, FC_COUNTER_CLOCKSOURCE)) {
        distrusted = 1;
        fc_buf_str(&tb, "the kernel does not trust the " FC_COUNTER_NAME ": " FC_COUNTER_CLOCKSOURCE
                        " is not among the available clocksources (");
        fc_buf_str(&tb, cs.available);
        fc_buf_str(&tb, "), " FC_DISTRUST_HINT);
        trust = trustbuf;
        if (pref == PREF_TSC) {
            fc_buf_str(&b, refuse);
            fc_buf_str(&b, trust);
            fc_mode_enter(FC_MODE_SYSTEM, msg, 0);
            return;
        }
    } else if (strcmp(cs.current, FC_COUNTER_CLOCKSOURCE) == 0) {
        atomic_store_explicit(&kernel_listed_counter, KERNEL_USES, memory_order_relaxed);
        trust = "the kernel uses it as its clocksource";
    } else if (fc_clocksource_list_unfiltered(cs.available)) {
        /* Listed by a list that lists everything (kernel.h): no sign of the
         * kernel's trust in a counter it does not use. */
        if (pref == PREF_AUTO) {
            fc_buf_str(&b, "cannot tell whether the kernel trusts the " FC_COUNTER_NAME ": it uses ");
            fc_buf_str(&b, cs.current[0] ? cs.current : "another clocksource");
            fc_buf_str(&b, ", and its list of available clocksources (");
            fc_buf_str(&b, cs.available);
            fc_buf_str(&b, ") is unfiltered (jiffies is listed: the tick is not in one-shot mode), so it would "
                           "list a counter it marked unstable too; set FASTCLOCK_MODE=tsc to use it anyway");
            fc_mode_enter(FC_MODE_SYSTEM, msg, 0);
            return;
        }
        trust = "the kernel's opinion of the " FC_COUNTER_NAME " is unknown (its clocksource list is unfiltered)";
    } else {
        atomic_store_explicit(&kernel_listed_counter, KERNEL_LISTED, memory_order_relaxed);
        fc_buf_str(&tb, "the kernel lists it as a stable clocksource (it currently uses ");
        fc_buf_str(&tb, cs.current[0] ? cs.current : "an unknown clocksource");
        fc_buf_str(&tb, ")");
        trust = trustbuf;
    }

    if (distrusted || pref == PREF_PERCPU) {
        /* Invariant but not in step across CPUs (or asked for): one line per CPU. */
        if (fc_percpu_setup(why, sizeof why) != 0) {
            fc_buf_str(&b, pref == PREF_PERCPU ? refuse : "");
            if (distrusted) {
                fc_buf_str(&b, trust);
                fc_buf_str(&b, ", and per-CPU calibration is not possible: ");
            }
            fc_buf_str(&b, why);
            fc_mode_enter(FC_MODE_SYSTEM, msg, 0);
            return;
        }
        if (pref == PREF_PERCPU)
            fc_buf_str(&b, "FASTCLOCK_MODE=percpu: ");
        if (distrusted) {
            fc_buf_str(&b, trust);
            fc_buf_str(&b, ", but CPUID says it is invariant: ");
        }
        fc_buf_str(&b, "each CPU's counter is calibrated separately and read with rdtscp");
        choose_percpu_kernel(pref == PREF_PERCPU, &b);
        fc_mode_enter(FC_MODE_PERCPU, msg, 0);
        return;
    }

    /* A timer erratum the kernel works around (arm64; kernel.c says which). */
    if (FC_COUNTER_ERRATA && fc_counter_erratum(fc_seam.sysroot ? fc_seam.sysroot : "", why, sizeof why)) {
        fc_buf_str(&b, refuse);
        fc_buf_str(&b, why);
        fc_mode_enter(FC_MODE_SYSTEM, msg, 0);
        return;
    }

    /* One sample now; the first line follows from a second one at least
     * 20 us later (calibrator thread, or the first reader after that):
     * until then the kernel answers, so the decision costs a few us. */
    if (fc_cal_begin(why, sizeof why) != 0) {
        fc_buf_str(&b, refuse);
        fc_buf_str(&b, why);
        fc_mode_enter(FC_MODE_SYSTEM, msg, 0);
        return;
    }
    if (pref == PREF_TSC)
        fc_buf_str(&b, "FASTCLOCK_MODE=tsc: ");
    fc_buf_str(&b, FC_COUNTER_INVARIANT);
    fc_buf_str(&b, trust);
    fc_mode_enter(FC_MODE_TSC, msg, 0);
}

static void do_init(void)
{
    int saved = errno; /* sysfs, getauxval: a successful read never changes errno */
    fc_refclock_init();
    /* Nobody else calibrates before the mode is decided, but a fork may have
     * left the lock set; and a fork handler (atfork prepare) may hold it now,
     * in which case it is the handler's to release, not ours. */
    int locked = fc_cal_trylock();
    decide();
    if (locked)
        fc_cal_unlock();
    fc_wall_probe_tai(); /* after: a TAI read meanwhile asks itself */
    errno = saved;
}

/* Set on the deciding thread for the length of the decision, and before
 * the mode says "initialising": a signal handler that interrupts the
 * decision on that thread must not wait for it (it would wait for itself).
 * A thread id stored after the mode left a window -- a gettid system call
 * long -- where a handler took its own thread for another and spun, under
 * load for over a minute, with the next timer signal waiting behind it. */
static __thread int deciding_here __attribute__((tls_model("initial-exec")));

int fc_try_init(void)
{
    int expected = FC_MODE_UNINIT;
    /* Restored, not cleared: a handler's own call, nested in the decision,
     * must leave the flag set for the decision it interrupted. */
    int outer = deciding_here;
    deciding_here = 1;
    atomic_signal_fence(memory_order_seq_cst);
    int won = atomic_compare_exchange_strong_explicit(&fc_mode, &expected, FC_MODE_INITIALIZING,
                                                      memory_order_acq_rel, memory_order_acquire);
    if (won)
        do_init();
    atomic_signal_fence(memory_order_seq_cst);
    deciding_here = outer;
    return won;
}

/* A fork child: a decision another thread was making did not come along
 * (that thread does not exist here).  Left "initialising", every read would
 * go to the kernel for the child's life and status wait 100 ms a call: the
 * child decides again instead.  (A decision on this very thread -- fork
 * from a handler that interrupted it -- goes on when the handler returns.) */
void fc_mode_after_fork_child(void)
{
    int expected = FC_MODE_INITIALIZING;
    if (!deciding_here)
        atomic_compare_exchange_strong_explicit(&fc_mode, &expected, FC_MODE_UNINIT, memory_order_acq_rel,
                                                memory_order_relaxed);
}

int fc_init_in_progress_elsewhere(void)
{
    return !deciding_here && atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_INITIALIZING;
}

#define WAIT_DECIDED_NS 100000000LL /* the decision takes well under 1 ms */

void fc_wait_decided(void)
{
    /* Wait for the decision, but never on the deciding thread itself, and
     * never long: bounded in time, not in turns (a turn of sched_yield on a
     * loaded machine lasts a scheduler slice). */
    if (!fc_init_in_progress_elsewhere())
        return;
    for (int i = 0; i < 1000; i++) {
        fc_cpu_relax();
        if (!fc_init_in_progress_elsewhere())
            return;
    }
    int64_t give_up = fc_kernel_ns(CLOCK_MONOTONIC) + WAIT_DECIDED_NS;
    while (fc_init_in_progress_elsewhere() && fc_kernel_ns(CLOCK_MONOTONIC) < give_up)
        sched_yield();
}

/* Mode tsc, no line yet: publish the first one as soon as its baseline
 * allows (~20 us from the decision), for callers that want the counter's
 * figures now (status, ticks_to_ns).  Another thread may be publishing it
 * (the calibrator, a reader): wait for that, bounded in time -- not in
 * turns, a preempted holder is away a scheduler slice -- but never for a
 * holder on this thread (a signal handler that interrupted it). */
#define FIRST_LINE_WAIT_NS 100000000LL /* the line comes ~20 us after the decision */

static int64_t real_mono_ns(void) /* the kernel's, never the test seam's: it bounds a wait */
{
    struct timespec ts;
    if (fc_refclock_direct()(CLOCK_MONOTONIC, &ts) != 0)
        return 0;
    return fc_ts_to_ns(&ts);
}

void fc_first_line_now(void)
{
    int turns = 0, waits = 0;
    int64_t give_up = 0;
    for (;;) {
        if (atomic_load_explicit(&fc_mode, memory_order_acquire) != FC_MODE_TSC ||
            fc_line_current(&fc_latch)->mult != 0)
            return;
        if (fc_cal_trylock()) {
            int r = fc_mode_recalibrate(); /* rechecks the mode under the lock */
            fc_cal_unlock();
            if (r != FC_RECAL_SKIPPED || ++turns >= 1000)
                return;
            for (int j = 0; j < 100; j++) /* ~1 us: the baseline is 20 us */
                fc_cpu_relax();
            continue;
        }
        if (fc_cal_held_here())
            return;
        if (++waits < 1000) {
            fc_cpu_relax();
            continue;
        }
        int64_t now = real_mono_ns();
        if (!give_up)
            give_up = now + FIRST_LINE_WAIT_NS;
        else if (now > give_up)
            return;
        sched_yield();
    }
}

/* ---- ticks ------------------------------------------------------------- */

int fc_ticks_synthesised(void)
{
    return atomic_load_explicit(&ticks_synth, memory_order_acquire);
}

uint64_t fc_ticks_synth(int64_t mono)
{
    if (!atomic_load_explicit(&ticks_synth, memory_order_acquire))
        return (uint64_t)mono;
    int64_t d = mono - atomic_load_explicit(&synth_base_mono, memory_order_relaxed);
    if (d < 0)
        d = 0;
    uint64_t tpn = atomic_load_explicit(&synth_tpn, memory_order_relaxed);
    return atomic_load_explicit(&synth_base_t, memory_order_relaxed) +
           (uint64_t)(((unsigned __int128)(uint64_t)d * tpn) >> 32);
}

double fc_ticks_hz(void)
{
    if (atomic_load_explicit(&fc_ticks_in_ns, memory_order_relaxed))
        return 1e9;
    if (atomic_load_explicit(&ticks_synth, memory_order_acquire))
        return (double)atomic_load_explicit(&synth_tpn, memory_order_relaxed) * 1e9 / (double)((uint64_t)1 << 32);
    return 1e9;
}

int64_t fc_ticks_to_ns(uint64_t ticks)
{
    fc_decide_now();
    fc_first_line_now(); /* the rate */
    if (atomic_load_explicit(&fc_ticks_in_ns, memory_order_relaxed))
        return (int64_t)ticks;
    int64_t ns;
    if (fc_cal_ticks_to_ns((int64_t)ticks, &ns))
        return ns;
    /* No rate yet: the first line is late (a handler interrupted its
     * calibration on this thread, or its writer is away over 100 ms). */
    return (int64_t)((double)(int64_t)ticks * rate_without_a_line(0));
}

void fc_reset_for_tests(void)
{
    fc_percpu_reset_for_tests();
    fc_cal_reset_for_tests();
    memset(&fc_latch, 0, sizeof fc_latch);
    atomic_store(&fc_mode, FC_MODE_UNINIT);
    atomic_store(&system_at_start, 0);
    atomic_store(&kernel_at_start, 0);
    atomic_store(&fc_percpu_kernel, 0);
    atomic_store(&fc_percpu_wall_kernel, 0);
    atomic_store(&kernel_reads_counter, 0);
    atomic_store(&kernel_listed_counter, 0);
    atomic_store(&mode_forced, 0);
    decided_pref = PREF_AUTO;
    fc_counter_reset_for_tests();
    fc_mode_read_env(); /* tests set FASTCLOCK_MODE before each decision */
    atomic_store(&reason_used, 0);
    atomic_store(&reason_ptr, (const char *)0);
    atomic_store(&calibrator_pref, -1);
    atomic_store(&default_unordered, 0);
    atomic_store(&fc_ticks_raw, 0);
    atomic_store(&fc_ticks_in_ns, 0);
    atomic_store(&fc_ticks_direct, (fc_direct_fn)0);
    atomic_store(&ticks_unit, TICKS_OPEN);
    atomic_store(&ticks_synth, 0);
}
