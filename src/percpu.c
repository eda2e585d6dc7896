/*
 * tsc-percpu: for machines whose CPUs' counters disagree (a warp was found,
 * or the kernel distrusts the TSC although CPUID calls it invariant).
 *
 * Each CPU gets its own line, calibrated from samples taken on that CPU
 * (rdtscp's TSC_AUX, checked before and after each kernel read), so offsets
 * of millions of cycles and small rate differences between CPUs are
 * absorbed.  A read is rdtscp -> this CPU's line, through the same
 * two-slot publication as the global line: no locks, no double-precision
 * division of absolute ticks (libmtev's approach had both).
 *
 * Guarantees: monotonic per thread (a thread-local clamp absorbs the small
 * disagreement between two CPUs' lines when a thread migrates); across
 * threads a later read may be below an earlier one by at most the two CPUs'
 * bounds added, and that sum (the two largest) is the bound this mode
 * reports in fastclock_status: it covers each read's error and the steps
 * back across threads.  A CPU whose line cannot be calibrated (its reads are
 * preempted or migrate every time) is read through the kernel; after 15 s
 * of failures it is given up for 15 s before trying again.
 *
 * Where the kernel's own clocksource is still the TSC, its vDSO read is the
 * cheaper one, and mode.c routes the fine clocks to it instead: no line is
 * kept (mode.c fc_percpu_to_kernel says why).
 */
#define _GNU_SOURCE
#include "percpu.h"

#include <string.h>
#include <sys/mman.h>
#include <sched.h>
#include <unistd.h>

#include "calibration.h"
#include "cpu.h"
#include "fmt.h"
#include "kernel.h"
#include "sync.h"
#include "warp.h"

#define RETRY_AFTER_GIVE_UP_NS (15LL * FC_NS_PER_SEC)
/* After a failed first line, the next try waits: each costs ~27 kernel
 * reads, and every read on that CPU would make one.  1 ms, doubling to 1 s
 * (the kernel answers meanwhile). */
#define START_BACKOFF_MIN_NS 1000000LL
#define START_BACKOFF_MAX_NS FC_NS_PER_SEC
/* rdtscp names CPUs 0..4095: Linux puts (node << 12) | cpu in TSC_AUX, so
 * CPU 4096 + k would read as CPU k (on another node) and take its line. */
#define MAX_SLOTS 4096

static struct fc_rate_seed seed; /* one CPU's rate, at setup */
/* Slots a test's reset retired (fc_percpu_reset_for_tests). */
static struct fc_cpu_slot *retired;
static int retired_n;

_Atomic(struct fc_cpu_slot *) fc_percpu_slots;
_Atomic int fc_percpu_nslots;
_Atomic int64_t fc_percpu_switch_floor;
__thread int64_t fc_percpu_tls_last __attribute__((tls_model("initial-exec")));
__thread struct fc_cpu_slot *fc_percpu_tls_slot __attribute__((tls_model("initial-exec")));

/* The possible CPUs' count (the largest number + 1), MAX_SLOTS + 1 for "more
 * than rdtscp can name". */
static int possible_cpus(void)
{
    if (fc_seam.ncpus > 0)
        return fc_seam.ncpus > MAX_SLOTS ? MAX_SLOTS + 1 : fc_seam.ncpus;
    char buf[256];
    if (fc_read_text(fc_seam.sysroot ? fc_seam.sysroot : "", "/sys/devices/system/cpu/possible", buf,
                     sizeof buf) <= 0)
        return 256; /* unreadable (no /sys): CPUs past it read the kernel's clock.  Not sysconf,
                       which may allocate, and this can run inside a read. */
    /* "0-3,8-11": the largest number + 1. */
    int max = 0, cur = 0, in_num = 0;
    for (const char *p = buf;; p++) {
        if (*p >= '0' && *p <= '9') {
            if (cur <= MAX_SLOTS) /* a malformed huge number saturates, never overflows */
                cur = cur * 10 + (*p - '0');
            in_num = 1;
            continue;
        }
        if (in_num && cur > max)
            max = cur;
        cur = 0;
        in_num = 0;
        if (!*p)
            break;
    }
    return max + 1 > MAX_SLOTS ? MAX_SLOTS + 1 : max + 1;
}

static struct fc_track track_of(struct fc_cpu_slot *sl, int cpu)
{
    struct fc_track t = {&sl->latch, &sl->cs, &sl->lock, cpu};
    return t;
}

/* Another thread's adjtimex poll in progress: a microsecond, unless that
 * thread was preempted in it.  Waited out until `until` (MONOTONIC), and
 * for a bounded number of turns (a simulated clock may stand still),
 * rather than measured again at once: twenty attempts take ~2 ms, and all
 * failing left the process in mode system for good over one preempted
 * poll.  Never this thread's own poll (a handler nested in it):
 * fc_sync_poll says MINE. */
static void wait_out_a_poll(int64_t until)
{
    int polled = FC_SYNC_POLL_BUSY;
    int64_t now = fc_kernel_ns(CLOCK_MONOTONIC);
    for (int i = 0; polled == FC_SYNC_POLL_BUSY && i < 100000 && now < until; i++) {
        if (i < 64)
            fc_cpu_relax();
        else
            sched_yield();
        now = fc_kernel_ns(CLOCK_MONOTONIC);
        polled = fc_sync_poll(now);
    }
}

/* Measure the counter's rate on one CPU (the first line of every CPU starts
 * from it): two samples 50 us apart, both on the same CPU, between two
 * adjtimex polls that found the same settings (a slope across a change
 * would mix two rates, with an uncertainty from the bracket widths alone). */
static int measure_seed(char *why, size_t why_size)
{
    struct fc_buf b;
    fc_buf_init(&b, why, why_size);
    int64_t wait_until = 0; /* one budget for the whole setup: 20 ms from the first busy poll */
    int waits = 0;
    for (int attempt = 0; attempt < 20; attempt++) {
        fc_sync_poll(fc_kernel_ns(CLOCK_MONOTONIC));
        uint64_t generation = fc_sync_generation();
        uint32_t aux;
        fc_now_counter_aux(&aux);
        int cpu = FC_AUX_CPU(aux);
        struct fc_sample s0, s1;
        if (fc_cal_sample(&s0, 8, cpu) != 0)
            continue;
        int64_t now = fc_kernel_ns(CLOCK_MONOTONIC);
        while (now >= s0.mono && now - s0.mono < 50000) { /* below: the read failed */
            fc_cpu_relax();
            now = fc_kernel_ns(CLOCK_MONOTONIC);
        }
        if (now - s0.mono < 50000 || fc_cal_sample(&s1, 8, cpu) != 0 || s1.t <= s0.t)
            continue;
        double rate = (double)(s1.mono - s0.mono) / (double)(s1.t - s0.t);
        if (!(rate > 0) || rate > 1e6)
            continue;
        struct fc_rate_seed m;
        m.rate = rate;
        m.unc = ((double)s0.width + (double)s1.width) * rate * 0.5 / (double)(s1.mono - s0.mono);
        /* Another thread's poll in progress: waited out, then measured
         * again, the attempt not counted -- within one 20 ms budget for the
         * whole setup (it may run inside a read, under the calibration
         * lock); past it, attempts count as before.  A handler nested in
         * this thread's own poll cannot wait for it: a change it found now
         * is charged as an unseen one, as before polls were. */
        if (fc_rate_seed_settings(&m, s1.mono) == FC_SYNC_POLL_BUSY) {
            int64_t t = fc_kernel_ns(CLOCK_MONOTONIC);
            if (!wait_until)
                wait_until = t + 20000000;
            if (t < wait_until && waits++ < 3) { /* and three waits at most: a clock that stands still */
                wait_out_a_poll(wait_until);
                attempt--;
            }
            continue;
        }
        if (fc_sync_generation() != generation)
            continue;
        seed = m;
        return 0;
    }
    fc_buf_str(&b, "could not measure the counter's rate on one CPU (the thread migrated or was "
                   "preempted in every attempt, or adjtimex changed the kernel's rate)");
    return -1;
}

/* The CPU this runs on, as the kernel says it apart from TSC_AUX (which
 * rdtscp reads, and the vDSO's getcpu too on a CPU with RDPID): the limit
 * of the per-CPU segment the kernel sets up for vgetcpu, (node << 12) | cpu
 * in GDT entry 15, read with lsl; else rseq's or the vDSO's answer through
 * sched_getcpu.  Never the getcpu system call: a seccomp filter made from
 * the calls libc makes may leave it out, and kill for it.  -1: unknown. */
static int cpu_apart_from_aux(void)
{
#if defined(__x86_64__)
    unsigned limit = 0;
    unsigned char ok;
    /* Both outputs in registers, limit early-clobbered: lsl writes it
     * before setz writes ok, so neither may share a register (or an
     * address register) with the other. */
    __asm__ __volatile__("lsl %[sel], %[lim]\n\tsetz %[ok]"
                         : [lim] "=&r"(limit), [ok] "=q"(ok)
                         : [sel] "r"(0x7bu)
                         : "cc");
    if (ok)
        return (int)(limit & 0xfff);
#endif
    return sched_getcpu();
}

int fc_percpu_setup(char *why, size_t why_size)
{
    struct fc_buf b;
    fc_buf_init(&b, why, why_size);
    /* Every caller asks here, so that no path runs rdtscp where it traps
     * (a warp found in mode tsc, which needs no rdtscp, comes here too). */
    if (!FC_HAVE_PERCPU || !(fc_seam.cpu ? fc_seam.cpu->has_rdtscp : fc_cpu_has_rdtscp())) {
        fc_buf_str(&b, FC_NO_PERCPU_REASON);
        return -1;
    }
    if (atomic_load_explicit(&fc_percpu_slots, memory_order_acquire))
        return 0;
    if (!fc_seam.counter_aux) {
        /* Linux puts (node << 12) | cpu in TSC_AUX; make sure it does here. */
        int agree = 0, disagree = 0;
        for (int i = 0; i < 8; i++) {
            uint32_t a1, a2;
            fc_counter_rdtscp(&a1);
            int cpu = cpu_apart_from_aux();
            fc_counter_rdtscp(&a2);
            if (cpu < 0 || a1 != a2)
                continue;
            if (FC_AUX_CPU(a1) == cpu)
                agree++;
            else
                disagree++;
        }
        if (!agree || disagree) {
            fc_buf_str(&b, "rdtscp does not name the CPU here (TSC_AUX is not set up by the kernel)");
            return -1;
        }
    }
    int n = possible_cpus();
    if (n > MAX_SLOTS) {
        fc_buf_str(&b, "this machine has more than 4096 possible CPUs, which rdtscp cannot name apart");
        return -1;
    }
    size_t size = (size_t)n * sizeof(struct fc_cpu_slot);
    void *mem;
    if (retired && retired_n == n) {
        mem = retired; /* after a test's reset: nothing reads them meanwhile */
        memset(mem, 0, size);
    } else {
        mem = mmap(0, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) {
            fc_buf_str(&b, "could not allocate per-CPU state");
            return -1;
        }
    }
    if (measure_seed(why, why_size) != 0) {
        if (mem != retired)
            munmap(mem, size);
        return -1;
    }
    retired = 0;
    /* The CPU the fast read checks rdtscp's answer against.  None with the
     * test seam's counter, which the fast read does not call (it reads
     * rdtscp itself): every such read is the slow read's, and the seam
     * stays off the fast one. */
    for (int i = 0; i < n; i++)
        ((struct fc_cpu_slot *)mem)[i].cpu = fc_seam.counter_aux ? -1 : i;
    atomic_store_explicit(&fc_percpu_nslots, n, memory_order_relaxed);
    atomic_store_explicit(&fc_percpu_slots, (struct fc_cpu_slot *)mem, memory_order_release);
    return 0;
}

/* When (kernel MONOTONIC) a CPU without a line (state: not OK) may try
 * again: its next start (a failed one backs off), and not before its retry
 * where it was given up (past that, failed retries back off as starts do).
 * 0: never tried.  Read without the slot's lock: a moment stale at worst. */
static int64_t slot_due(struct fc_cpu_slot *sl, int state)
{
    int64_t at = __atomic_load_n(&sl->next_start, __ATOMIC_RELAXED);
    int64_t retry = atomic_load_explicit(&sl->retry_after, memory_order_relaxed);
    return state == FC_SLOT_GIVEN_UP && retry > at ? retry : at;
}

/* With the slot's lock held: first line, or a fresh one, for this CPU. */
static void calibrate_slot(struct fc_cpu_slot *sl, int cpu)
{
    struct fc_track t = track_of(sl, cpu);
    int64_t now = fc_kernel_ns(CLOCK_MONOTONIC);
    int state = atomic_load_explicit(&sl->state, memory_order_relaxed);
    if (state == FC_SLOT_GIVEN_UP) {
        if (now < atomic_load_explicit(&sl->retry_after, memory_order_relaxed))
            return;
        state = FC_SLOT_EMPTY;
    }
    if (state == FC_SLOT_EMPTY) {
        if (now < sl->next_start)
            return; /* the last try failed a moment ago */
        if (fc_track_start(&t, &seed) == 0) {
            sl->failing_since = 0;
            sl->start_backoff = 0;
            atomic_store_explicit(&sl->state, FC_SLOT_OK, memory_order_release);
            return;
        }
        int64_t wait = sl->start_backoff ? 2 * sl->start_backoff : START_BACKOFF_MIN_NS;
        sl->start_backoff = wait < START_BACKOFF_MAX_NS ? wait : START_BACKOFF_MAX_NS;
        __atomic_store_n(&sl->next_start, now + sl->start_backoff, __ATOMIC_RELAXED); /* fc_percpu_interval_ns peeks */
        if (!sl->failing_since)
            sl->failing_since = now;
        if (now - sl->failing_since >= RETRY_AFTER_GIVE_UP_NS) {
            atomic_store_explicit(&sl->retry_after, now + RETRY_AFTER_GIVE_UP_NS, memory_order_relaxed);
            atomic_store_explicit(&sl->state, FC_SLOT_GIVEN_UP, memory_order_release);
            sl->failing_since = 0;
        }
        return;
    }
    if (fc_track_recalibrate(&t) == FC_RECAL_FAILED) {
        /* 15 s without a usable sample on this CPU: read it through the kernel. */
        atomic_store_explicit(&sl->retry_after, now + RETRY_AFTER_GIVE_UP_NS, memory_order_relaxed);
        atomic_store_explicit(&sl->state, FC_SLOT_GIVEN_UP, memory_order_release);
        sl->cs.failing_since = 0;
    }
}

/* Not answered by this CPU's line at the first try: a line to start or
 * renew here, a retry, or the kernel. */
__attribute__((cold)) int64_t fc_percpu_read_slow(enum fc_kind kind)
{
    struct fc_cpu_slot *base = atomic_load_explicit(&fc_percpu_slots, memory_order_acquire);
    int n = atomic_load_explicit(&fc_percpu_nslots, memory_order_relaxed);
    int64_t mono = 0, offset = 0;
    int have = 0;
    uint32_t aux;
    int cpu = -1;
    for (int attempt = 0; attempt < 3 && base; attempt++) {
        if (cpu < 0) {
            fc_now_counter_aux(&aux);
            cpu = FC_AUX_CPU(aux);
        }
        if (cpu >= n)
            break;
        struct fc_cpu_slot *sl = &base[cpu];
        fc_percpu_tls_slot = sl; /* the fast read's guess from now on */
        if (atomic_load_explicit(&sl->state, memory_order_acquire) == FC_SLOT_OK) {
            int ok = fc_line_read_counted(&sl->latch, kind, fc_now_counter_aux, &aux, &mono, &offset);
            if (FC_AUX_CPU(aux) != cpu) {
                cpu = FC_AUX_CPU(aux); /* moved meanwhile: that CPU's line */
                continue;
            }
            if (ok) {
                have = 1;
                break;
            }
        }
        /* No line here, and none due yet (given up for 15 s, or its last
         * start failed a moment ago): the kernel answers, without the slot's
         * lock -- a write to a line every reader on this CPU shares, and a
         * clock read more, on each read for as long as that lasts, on a
         * machine whose kernel clock may be a system call.  Timed on the
         * coarse clock (memory, never a system call): a retry comes up to a
         * tick late. */
        int state = atomic_load_explicit(&sl->state, memory_order_acquire);
        if (state != FC_SLOT_OK) {
            int64_t coarse = fc_kernel_ns(CLOCK_MONOTONIC_COARSE);
            if (coarse != 0 && coarse < slot_due(sl, state)) /* (0: unreadable -- the lock's path decides) */
                break;
        }
        /* This CPU's line is missing or due: calibrate it here, unless
         * someone already is (then the kernel answers this read). */
        struct fc_track tr = track_of(sl, cpu);
        if (!fc_track_trylock(&tr))
            break;
        /* The fast span ends at the next adjtimex poll; a line still
         * within its soft span and settings is extended, not recalibrated. */
        uint64_t seq_before = atomic_load_explicit(&sl->latch.seq, memory_order_relaxed);
        if (atomic_load_explicit(&sl->state, memory_order_relaxed) != FC_SLOT_OK || fc_track_poll(&tr))
            calibrate_slot(sl, cpu);
        fc_track_unlock(&tr);
        /* Read again only if this CPU now has a new line: a calibration that
         * was skipped (noisy or migrated samples) left the old one, which
         * could not answer, and is not retried by the same read (each try
         * costs ~27 kernel reads). */
        if (atomic_load_explicit(&sl->state, memory_order_acquire) != FC_SLOT_OK ||
            atomic_load_explicit(&sl->latch.seq, memory_order_acquire) == seq_before)
            break;
    }
    if (!have) {
        if (kind == FC_REAL || kind == FC_TAI)
            return fc_kernel_ns(fc_kind_clock(kind)); /* not monotonic anyway */
        /* BOOTTIME too is MONOTONIC through the thread's clamp, plus the
         * offset every line carries: the kernel's own BOOTTIME could be
         * below what a line just gave this thread. */
        mono = fc_kernel_ns(CLOCK_MONOTONIC);
        offset = 0;
        if (kind == FC_BOOT) {
            int64_t boot = fc_kernel_ns(CLOCK_BOOTTIME);
            offset = fc_cal_boot_offset(boot - mono);
        }
    }
    if (have && kind == FC_BOOT)
        offset = fc_percpu_boot_offset(offset);
    return fc_percpu_clamp(mono) + offset;
}

/* MONOTONIC, which every wall read here is built on too, gets a read with
 * the kind folded in: the generic one tests the kind at run time. */
static __attribute__((noinline)) int64_t percpu_read_mono(void)
{
    int64_t ns;
    if (FC_LIKELY(fc_percpu_read_fast(FC_MONO, &ns)))
        return ns;
    return fc_percpu_read_slow(FC_MONO);
}

int64_t fc_percpu_read(enum fc_kind kind)
{
    if (FC_LIKELY(kind == FC_MONO))
        return percpu_read_mono();
    int64_t ns;
    if (FC_LIKELY(fc_percpu_read_fast(kind, &ns)))
        return ns;
    return fc_percpu_read_slow(kind);
}

void fc_percpu_maintain_cpu(int cpu, int force)
{
    struct fc_cpu_slot *base = atomic_load_explicit(&fc_percpu_slots, memory_order_acquire);
    if (!base || cpu >= atomic_load_explicit(&fc_percpu_nslots, memory_order_relaxed))
        return;
    struct fc_cpu_slot *sl = &base[cpu];
    struct fc_track t = track_of(sl, cpu);
    if (!fc_track_trylock(&t))
        return;
    int state = atomic_load_explicit(&sl->state, memory_order_relaxed);
    int64_t now = fc_kernel_ns(CLOCK_MONOTONIC);
    if (state != FC_SLOT_OK || force || now - sl->cs.last_ok_mono >= sl->cs.interval_ns)
        calibrate_slot(sl, cpu);
    fc_track_unlock(&t);
}

void fc_percpu_set_floor(int64_t floor_ns)
{
    atomic_store_explicit(&fc_percpu_switch_floor, floor_ns, memory_order_relaxed);
}

double fc_percpu_seed_rate(void)
{
    return seed.rate;
}

/* The earliest time (kernel MONOTONIC), not before not_before, a CPU
 * without a line is due for a start or a retry; *shortest_ok_interval: the
 * shortest interval of the CPUs that have one (0: none).  INT64_MAX: none
 * due (every CPU calibrated, or none tried yet). */
static int64_t first_cpu_due(int64_t not_before, int64_t *shortest_ok_interval)
{
    struct fc_cpu_slot *base = atomic_load_explicit(&fc_percpu_slots, memory_order_acquire);
    int n = atomic_load_explicit(&fc_percpu_nslots, memory_order_relaxed);
    int64_t best = 0, first_due = INT64_MAX;
    for (int i = 0; base && i < n; i++) {
        int state = atomic_load_explicit(&base[i].state, memory_order_relaxed);
        if (state != FC_SLOT_OK) {
            /* One never tried (0) is a CPU the tour does not visit
             * (offline, or outside the affinity): after the first tour every
             * other CPU has been tried. */
            int64_t at = slot_due(&base[i], state);
            if (at != 0 && at >= not_before && at < first_due)
                first_due = at;
            continue;
        }
        int64_t iv = base[i].cs.interval_ns;
        if (iv > 0 && (best == 0 || iv < best))
            best = iv;
    }
    *shortest_ok_interval = best;
    return first_due;
}

int64_t fc_percpu_interval_ns(void)
{
    int64_t best, due = first_cpu_due(0, &best);
    if (best)
        return best;
    if (due == INT64_MAX)
        return 1000000; /* none tried yet: look again in 1 ms */
    return fc_clamp_i64(due - fc_kernel_ns(CLOCK_MONOTONIC), 1000000, FC_NS_PER_SEC);
}

int64_t fc_percpu_idle_until(int64_t last_tour)
{
    int64_t best, due = first_cpu_due(last_tour, &best);
    return best || due == INT64_MAX ? 0 : due;
}


/* A fork child: the slot locks of threads that are gone are freed; a slot
 * this thread is calibrating (fork from a handler that interrupted it)
 * stays locked until that calibration goes on and ends (each lock names
 * its holder: calibration.c). */
void fc_percpu_after_fork_child(void)
{
    struct fc_cpu_slot *base = atomic_load_explicit(&fc_percpu_slots, memory_order_acquire);
    int n = atomic_load_explicit(&fc_percpu_nslots, memory_order_relaxed);
    for (int i = 0; base && i < n; i++)
        fc_track_free_in_child(&base[i].lock, &base[i].cs);
}

void fc_percpu_forget_floors(void)
{
    atomic_store_explicit(&fc_percpu_switch_floor, 0, memory_order_relaxed);
    fc_percpu_tls_last = 0;
}

void fc_percpu_stats(struct fc_percpu_stats *out)
{
    memset(out, 0, sizeof *out);
    out->max_warp_cycles = fc_warp_noted();
    struct fc_cpu_slot *base = atomic_load_explicit(&fc_percpu_slots, memory_order_acquire);
    int n = atomic_load_explicit(&fc_percpu_nslots, memory_order_relaxed);
    out->cpus = base ? n : 0;
    double hz = 0;
    int64_t top1 = 0, top2 = 0;
    int64_t now = fc_kernel_ns(CLOCK_MONOTONIC);
    for (int i = 0; base && i < n; i++) {
        int state = atomic_load_explicit(&base[i].state, memory_order_relaxed);
        if (state == FC_SLOT_GIVEN_UP)
            out->given_up++;
        if (state != FC_SLOT_OK)
            continue;
        struct fc_line l;
        struct fc_meta m;
        fc_line_copy(&base[i].latch, &l, &m, 0, 0, 0);
        out->calibrated++;
        /* A line is read only within its fast span: past it a reader polls
         * adjtimex or recalibrates first, or the kernel answers (clamped at
         * the line's end).  So its bound counts up to that end, not up to
         * now: a CPU nobody has read on since does not hold the bound up.
         * The end is the line's own value there; a line behind the kernel
         * reaches it later in kernel time, by up to its bound b there.  The
         * bound grows by well under 0.5 ns per ns (sync.c), so end + 2b is
         * no earlier than the kernel's time at the end. */
        int64_t at = now;
        if (l.fast_span) {
            int64_t end = fc_line_eval(&l, (int64_t)l.fast_span);
            end += 2 * fc_meta_bound(&m, end);
            if (end < at)
                at = end;
        }
        int64_t bound = fc_meta_bound(&m, at);
        if (bound > top1) {
            top2 = top1;
            top1 = bound;
        } else if (bound > top2) {
            top2 = bound;
        }
        int64_t age = now - m.published_mono_ns;
        if (age > out->max_age_ns)
            out->max_age_ns = age;
        hz += 1e9 / base[i].cs.rate;
    }
    if (out->calibrated)
        out->mean_hz = hz / out->calibrated;
    /* A read on CPU a may be ahead of the kernel by a's bound, and a later
     * read on CPU b behind it by b's: across threads, values may step back
     * by the two bounds added.  The reported bound is that sum, so that it
     * also bounds the steps back (and, looser, each read's error: a
     * thread's clamp carries a value from another CPU's line). */
    out->bound_ns = top1 + top2;
}

void fc_percpu_reset_for_tests(void)
{
    /* Retired, not unmapped: another thread's guess may still point into
     * these slots (the fast read trusts it), and now finds none usable.
     * The next setup of as many slots takes them again (else they stay
     * mapped: a test's leak).  As every reset, with no read or calibration
     * running meanwhile (testing.c). */
    struct fc_cpu_slot *base = atomic_exchange(&fc_percpu_slots, (struct fc_cpu_slot *)0);
    int n = atomic_exchange(&fc_percpu_nslots, 0);
    for (int i = 0; base && i < n; i++)
        atomic_store(&base[i].state, FC_SLOT_EMPTY);
    if (base) {
        retired = base;
        retired_n = n;
    }
    fc_warp_reset_for_tests();
    atomic_store(&fc_percpu_switch_floor, 0);
    fc_percpu_tls_last = 0;
    fc_percpu_tls_slot = 0;
    memset(&seed, 0, sizeof seed);
}
