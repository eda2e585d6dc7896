/*
 * Mode decision.  Runs once, lazily, on the first read from any thread,
 * and costs about 60 us: CPUID, two sysfs files, a short rate measurement
 * against the kernel (no 20 ms sleep), and a speed comparison.  Readers that
 * arrive while it runs get the kernel's clocks; the first line starts at or
 * above those values so nothing goes backwards.
 *
 * mode tsc needs all of:
 *   - an invariant TSC (CPUID 0x80000007 EDX[8]);
 *   - the kernel's trust: "tsc" listed in available_clocksource (the kernel
 *     hides a clocksource its watchdog or its boot-time sync check marked
 *     unstable) -- the kernel need not *use* it: on Xen/HPET/kvm-clock
 *     machines this is where fastclock helps most;
 *   - a calibration that converges, a counter that never goes backwards,
 *   - and a read that is cheaper than clock_gettime here.
 * FASTCLOCK_MODE=tsc skips the last check and tolerates an unreadable
 * sysfs, but still refuses a non-invariant or distrusted TSC.
 */
#define _GNU_SOURCE
#include "mode.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "calibration.h"
#include "cpu.h"
#include "fmt.h"
#include "kernel.h"
#include "percpu.h"
#include "sync.h"

_Atomic int fc_mode;
struct fc_seam fc_seam;


enum fc_mode_pref { PREF_AUTO, PREF_TSC, PREF_PERCPU, PREF_SYSTEM };

static _Atomic int mode_forced;
static _Atomic int system_from_start;
/* Costs measured at the decision, ns per read (0: not measured). */
static _Atomic double read_ns, kernel_read_ns;
static _Atomic int calibrator_pref = -1;

/* Reasons are copied into slots that are never rewritten, so a pointer
 * handed out by fastclock_status stays valid and unchanged. */
#define REASON_SLOTS 16
static char reason_slots[REASON_SLOTS][256];
static _Atomic int reason_used;
static _Atomic(const char *) reason_ptr;

void fc_set_reason(const char *reason)
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
    return r ? r : "not decided yet: no clock has been read";
}

int fc_system_from_start(void)
{
    return atomic_load_explicit(&fc_mode, memory_order_acquire) == FC_MODE_SYSTEM &&
           atomic_load_explicit(&system_from_start, memory_order_relaxed);
}

int fc_mode_forced(void)
{
    return atomic_load_explicit(&mode_forced, memory_order_relaxed);
}

static void say(const char *a, const char *b, const char *c)
{
    char msg[512];
    struct fc_buf buf;
    fc_buf_init(&buf, msg, sizeof msg);
    fc_buf_str(&buf, a);
    fc_buf_str(&buf, b);
    fc_buf_str(&buf, c);
    ssize_t r = write(2, msg, buf.len);
    (void)r;
}

static int word_eq(const char *a, const char *b)
{
    while (*a == ' ' || *a == '\t') a++;
    size_t n = strlen(b);
    if (strncasecmp(a, b, n) != 0)
        return 0;
    a += n;
    while (*a == ' ' || *a == '\t') a++;
    return *a == 0;
}

static enum fc_mode_pref parse_mode_env(void)
{
    static _Atomic int warned;
    const char *v = getenv("FASTCLOCK_MODE");
    if (!v || word_eq(v, "") || word_eq(v, "auto"))
        return PREF_AUTO;
    if (word_eq(v, "tsc"))
        return PREF_TSC;
    if (word_eq(v, "system"))
        return PREF_SYSTEM;
    if (word_eq(v, "percpu") || word_eq(v, "tsc-percpu"))
        return PREF_PERCPU;
    if (!atomic_exchange(&warned, 1))
        say("fastclock: ignoring FASTCLOCK_MODE=", v,
            ": it must be auto, tsc, percpu or system; using auto\n");
    return PREF_AUTO;
}

enum fc_calibrator_pref fc_calibrator_pref(void)
{
    int p = atomic_load_explicit(&calibrator_pref, memory_order_relaxed);
    if (p >= 0)
        return (enum fc_calibrator_pref)p;
    const char *v = getenv("FASTCLOCK_CALIBRATOR");
    p = FC_CAL_AUTO;
    if (v && word_eq(v, "thread"))
        p = FC_CAL_THREAD;
    else if (v && word_eq(v, "lazy"))
        p = FC_CAL_LAZY;
    else if (v && !word_eq(v, "") && !word_eq(v, "auto"))
        say("fastclock: ignoring FASTCLOCK_CALIBRATOR=", v,
            ": it must be auto, thread or lazy; using auto\n");
    atomic_store_explicit(&calibrator_pref, p, memory_order_relaxed);
    return (enum fc_calibrator_pref)p;
}

/* Cost of 64 reads of each clock, best of 7 batches, in counter ticks. */
static void compare_costs(uint64_t *ours, uint64_t *kernel)
{
    volatile int64_t sink = 0;
    *ours = *kernel = UINT64_MAX;
    for (int batch = 0; batch < 7; batch++) {
        uint64_t t0 = fc_counter_ordered();
        for (int i = 0; i < 64; i++)
            sink += fastclock_mono_ns();
        uint64_t t1 = fc_counter_ordered();
        for (int i = 0; i < 64; i++) {
            struct timespec ts;
            fc_kernel_gettime(CLOCK_MONOTONIC, &ts);
            sink += ts.tv_nsec;
        }
        uint64_t t2 = fc_counter_ordered();
        if (t1 - t0 < *ours) *ours = t1 - t0;
        if (t2 - t1 < *kernel) *kernel = t2 - t1;
    }
    (void)sink;
}

/* Ticks for 64 reads (compare_costs), as ns per read with one decimal. */
static double ns_per_read(uint64_t ticks64)
{
    struct fc_cal_stats st;
    fc_cal_stats(&st);
    return (double)ticks64 * st.rate_ns_per_tick / 64.0;
}

static void append_ns_per_read(struct fc_buf *b, uint64_t ticks64)
{
    fc_buf_fixed(b, ns_per_read(ticks64), 1);
}

void fc_measured_costs(double *ours, double *kernel)
{
    *ours = atomic_load_explicit(&read_ns, memory_order_relaxed);
    *kernel = atomic_load_explicit(&kernel_read_ns, memory_order_relaxed);
}

static void decide_system(const char *reason, int forced)
{
    atomic_store_explicit(&system_from_start, 1, memory_order_relaxed);
    fc_set_reason(reason);
    fc_cal_publish_system(0);
    atomic_store_explicit(&mode_forced, forced, memory_order_relaxed);
    atomic_store_explicit(&fc_mode, FC_MODE_SYSTEM, memory_order_release);
}

static void do_init(void)
{
    char why[256], msg[512];
    struct fc_buf b;
    enum fc_mode_pref pref = parse_mode_env();
    int forced = pref != PREF_AUTO;
    const char *refuse = pref == PREF_TSC      ? "FASTCLOCK_MODE=tsc refused: "
                         : pref == PREF_PERCPU ? "FASTCLOCK_MODE=percpu refused: "
                                               : "";

    fc_refclock_init();
    /* Nobody else calibrates before the mode is decided, but a fork may have left the lock set. */
    fc_cal_trylock();

    if (pref == PREF_SYSTEM) {
        decide_system("FASTCLOCK_MODE=system asks for the kernel's clocks", 1);
        goto out;
    }

    struct fc_cpu_info cpu;
    if (fc_seam.cpu)
        cpu = *fc_seam.cpu;
    else
        fc_cpu_probe(&cpu);
    if (!FC_HAVE_COUNTER || !cpu.has_tsc) {
        fc_buf_init(&b, msg, sizeof msg);
        fc_buf_str(&b, refuse);
        fc_buf_str(&b, "this CPU has no time-stamp counter fastclock can read");
        decide_system(msg, forced);
        goto out;
    }
    if (!cpu.invariant_tsc) {
        fc_buf_init(&b, msg, sizeof msg);
        fc_buf_str(&b, refuse);
        fc_buf_str(&b, "the CPU does not report an invariant TSC (CPUID 0x80000007 EDX bit 8), "
                       "so its rate may change with frequency and sleep states");
        decide_system(msg, forced);
        goto out;
    }

    struct fc_clocksource_info cs;
    fc_clocksource_read(fc_seam.sysroot ? fc_seam.sysroot : "", &cs);
    const char *trust;
    char trustbuf[256];
    int distrusted = 0;
    if (cs.available_errno) {
        if (pref == PREF_AUTO) {
            fc_buf_init(&b, msg, sizeof msg);
            fc_buf_str(&b, "cannot tell whether the kernel trusts the TSC: " FC_CLOCKSOURCE_DIR
                           "/available_clocksource is unreadable (");
            fc_buf_str(&b, fc_errno_text(cs.available_errno));
            fc_buf_str(&b, "); set FASTCLOCK_MODE=tsc to use it anyway");
            decide_system(msg, 0);
            goto out;
        }
        trust = "the kernel's opinion of the TSC is unknown (sysfs unreadable)";
    } else if (!fc_word_in_list(cs.available, FC_COUNTER_CLOCKSOURCE)) {
        distrusted = 1;
        fc_buf_init(&b, trustbuf, sizeof trustbuf);
        fc_buf_str(&b, "the kernel does not trust the TSC: it is not among the available clocksources (");
        fc_buf_str(&b, cs.available);
        fc_buf_str(&b, "), which happens when the kernel marked it unstable");
        trust = trustbuf;
        if (pref == PREF_TSC) {
            fc_buf_init(&b, msg, sizeof msg);
            fc_buf_str(&b, refuse);
            fc_buf_str(&b, trust);
            decide_system(msg, 1);
            goto out;
        }
    } else if (strcmp(cs.current, FC_COUNTER_CLOCKSOURCE) == 0) {
        trust = "the kernel uses it as its clocksource";
    } else {
        fc_buf_init(&b, trustbuf, sizeof trustbuf);
        fc_buf_str(&b, "the kernel lists it as a stable clocksource (it currently uses ");
        fc_buf_str(&b, cs.current[0] ? cs.current : "an unknown clocksource");
        fc_buf_str(&b, ")");
        trust = trustbuf;
    }

    if (distrusted || pref == PREF_PERCPU) {
        /* Invariant but not in step across CPUs (or asked for): one line per CPU. */
        if (!cpu.has_rdtscp) {
            fc_buf_init(&b, msg, sizeof msg);
            fc_buf_str(&b, pref == PREF_PERCPU ? refuse : "");
            fc_buf_str(&b, distrusted ? trust : "per-CPU calibration needs rdtscp");
            fc_buf_str(&b, distrusted ? ", and per-CPU calibration needs rdtscp, which this CPU lacks" : "");
            decide_system(msg, forced);
            goto out;
        }
        if (fc_percpu_setup(why, sizeof why) != 0) {
            fc_buf_init(&b, msg, sizeof msg);
            fc_buf_str(&b, pref == PREF_PERCPU ? refuse : "");
            if (distrusted) {
                fc_buf_str(&b, trust);
                fc_buf_str(&b, ", and per-CPU calibration is not possible: ");
            }
            fc_buf_str(&b, why);
            decide_system(msg, forced);
            goto out;
        }
        fc_sync_poll(fc_kernel_ns(CLOCK_MONOTONIC));
        fc_cal_publish_system(0); /* every read goes to the per-CPU path */
        fc_buf_init(&b, msg, sizeof msg);
        if (pref == PREF_PERCPU)
            fc_buf_str(&b, "FASTCLOCK_MODE=percpu: ");
        if (distrusted) {
            fc_buf_str(&b, trust);
            fc_buf_str(&b, ", but CPUID says it is invariant: ");
        }
        fc_buf_str(&b, "each CPU's counter is calibrated separately and read with rdtscp");
        fc_set_reason(msg);
        atomic_store_explicit(&mode_forced, forced, memory_order_relaxed);
        atomic_store_explicit(&fc_mode, FC_MODE_PERCPU, memory_order_release);
        goto out;
    }

    if (fc_cal_start(cpu.tsc_hz, cpu.tsc_hz_source, why, sizeof why) != 0) {
        fc_buf_init(&b, msg, sizeof msg);
        fc_buf_str(&b, refuse);
        fc_buf_str(&b, why);
        decide_system(msg, forced);
        goto out;
    }

    uint64_t ours = 0, kernel = 0;
    if (!fc_seam.skip_speed_check && !fc_seam.counter) {
        compare_costs(&ours, &kernel);
        atomic_store_explicit(&read_ns, ns_per_read(ours), memory_order_relaxed);
        atomic_store_explicit(&kernel_read_ns, ns_per_read(kernel), memory_order_relaxed);
        if (pref == PREF_AUTO && ours >= kernel) {
            fc_buf_init(&b, msg, sizeof msg);
            fc_buf_str(&b, "clock_gettime is already as fast as the counter here (");
            append_ns_per_read(&b, kernel);
            fc_buf_str(&b, " ns against ");
            append_ns_per_read(&b, ours);
            fc_buf_str(&b, " ns per read)");
            fc_cal_fail_to_system(msg);
            goto out;
        }
    }

    fc_buf_init(&b, msg, sizeof msg);
    if (pref == PREF_TSC)
        fc_buf_str(&b, "FASTCLOCK_MODE=tsc: ");
    fc_buf_str(&b, "the TSC is invariant and ");
    fc_buf_str(&b, trust);
    if (ours && kernel) {
        fc_buf_str(&b, "; a read costs ");
        append_ns_per_read(&b, ours);
        fc_buf_str(&b, " ns against ");
        append_ns_per_read(&b, kernel);
        fc_buf_str(&b, " ns for clock_gettime");
    }
    fc_set_reason(msg);
    atomic_store_explicit(&mode_forced, forced, memory_order_relaxed);
    atomic_store_explicit(&fc_mode, FC_MODE_TSC, memory_order_release);
out:
    fc_cal_unlock();
    fc_calibrator_wake();
}

static _Atomic long init_tid;

int fc_try_init(void)
{
    int expected = FC_MODE_UNINIT;
    if (!atomic_compare_exchange_strong_explicit(&fc_mode, &expected, FC_MODE_INITIALIZING,
                                                 memory_order_acq_rel, memory_order_acquire))
        return 0;
    atomic_store_explicit(&init_tid, (long)syscall(SYS_gettid), memory_order_relaxed);
    do_init();
    atomic_store_explicit(&init_tid, 0, memory_order_relaxed);
    return 1;
}

int fc_init_in_progress_elsewhere(void)
{
    if (atomic_load_explicit(&fc_mode, memory_order_acquire) != FC_MODE_INITIALIZING)
        return 0;
    /* A signal handler on the initialising thread itself must not wait. */
    return atomic_load_explicit(&init_tid, memory_order_relaxed) != (long)syscall(SYS_gettid);
}

/* ---- process lifecycle ------------------------------------------------- */

static _Atomic int fork_held_lock;

static void atfork_prepare(void)
{
    /* Keep the writer's state whole across fork: wait briefly for a
     * calibration in progress (a few microseconds), never indefinitely. */
    for (int i = 0; i < 2000; i++) {
        if (fc_cal_trylock()) {
            atomic_store_explicit(&fork_held_lock, 1, memory_order_relaxed);
            return;
        }
        if (i > 100)
            sched_yield();
        else
            fc_cpu_relax();
    }
}

static void atfork_parent(void)
{
    if (atomic_exchange_explicit(&fork_held_lock, 0, memory_order_relaxed))
        fc_cal_unlock();
}

static void atfork_child(void)
{
    atomic_store_explicit(&fork_held_lock, 0, memory_order_relaxed);
    fc_calibrator_after_fork_child();
}

__attribute__((constructor)) static void fc_library_loaded(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    enum fc_calibrator_pref p = fc_calibrator_pref();
    if (p == FC_CAL_THREAD || (p == FC_CAL_AUTO && !fc_default_lazy))
        fc_calibrator_start();
}

void fc_reset_for_tests(void)
{
    fc_calibrator_stop();
    fc_calibrator_reset_for_tests();
    fc_percpu_reset_for_tests();
    fc_cal_reset_for_tests();
    memset(&fc_latch, 0, sizeof fc_latch);
    atomic_store(&fc_mode, FC_MODE_UNINIT);
    atomic_store(&mode_forced, 0);
    atomic_store(&system_from_start, 0);
    atomic_store(&read_ns, 0.0);
    atomic_store(&kernel_read_ns, 0.0);
    atomic_store(&reason_used, 0);
    atomic_store(&reason_ptr, (const char *)0);
    atomic_store(&calibrator_pref, -1);
    atomic_store_explicit(&fc_coarse.mono, 0, memory_order_relaxed);
    atomic_store_explicit(&fc_coarse.real, 0, memory_order_relaxed);
    atomic_store_explicit(&fc_coarse.floor_mono, 0, memory_order_relaxed);
}
