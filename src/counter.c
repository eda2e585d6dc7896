/*
 * Which instruction the ordered reads use, and whether the kernel's clock is
 * so much cheaper here that ordered reads -- or all fine reads -- should go
 * to it.
 *
 * arm64 has the same choice: isb;mrs cntvct_el0 or, with FEAT_ECV, the
 * self-synchronised mrs cntvctss_el0 (counter.h), in the FC_READ_RDTSCP slot.
 *
 * Both lfence;rdtsc and rdtscp keep the counter read behind every earlier
 * load, which is the cross-thread guarantee (tests/guarantees_test.cc proves
 * it with a check_tsc_warp-style test, whichever is chosen) -- where lfence
 * waits for earlier instructions, which most AMD families promise only
 * under a kernel setting a guest cannot see (cpu.h).  (A CPU of those
 * without rdtscp has lfence;rdtsc alone: the kernel's own ordered read
 * there, too, once it has set DE_CFG.)  The kernel's
 * rdtsc_ordered() prefers rdtscp where the CPU has it; so do we on Intel,
 * while on AMD, where rdtscp is the dearer one, lfence;rdtsc wherever it is
 * certainly ordered (the rule and its margins: fc_counter_prefer_rdtscp's
 * comment).  The kernel's clock wins only when it
 * costs under half of an ordered counter read -- a counter that traps in a
 * VM, say -- never on a close call, so the same machine makes the same
 * choice every time; and the unordered reads too when it costs under half
 * of a bare one.
 */
#define _GNU_SOURCE
#include <stdatomic.h>

#include "base.h"
#include "counter.h"
#include "refclock.h"
#include "seam.h"

#include "cpu.h"

#define BATCH 16
#define BATCHES 5
#define RDTSCP_MARGIN 1.25  /* the vendor's instruction unless it costs 1.25x the other, twice */
#define KERNEL_MARGIN 0.50  /* the kernel only if it costs under half */
#define CHOOSE_ROUNDS 15    /* interleaved rounds of the three candidates (~20 us here) */
#define KERNEL_ROUNDS 9     /* rdtscp against the kernel's read: a gap of 3x or more to tell */
#define WALL_LINE_MARGIN 1.04 /* the line's wall read only where the kernel's costs 1.04x it, twice */
#define WALL_ROUNDS 9         /* interleaved rounds of the two wall reads (~20 us here) ... */
#define WALL_BATCH 48         /* ... of 48 reads each: a counter that moves in steps (26 ticks on an
                                 AMD guest) quantises a 16-read batch's ratio to ~3%, this one to ~1% */

/* Ticks for one batch of n reads; of BATCH reads. */
#define BATCH_TICKS_N(expr, n, out)                         \
    do {                                                    \
        uint64_t t0_ = fc_counter_lfence();                 \
        for (int i_ = 0; i_ < (n); i_++)                    \
            sink += (expr);                                 \
        (out) = fc_counter_lfence() - t0_;                  \
    } while (0)
#define BATCH_TICKS(expr, out) BATCH_TICKS_N(expr, BATCH, out)

/* Best of BATCHES batches of BATCH reads, in counter ticks per batch. */
#define BEST_OF(expr, out)                                  \
    do {                                                    \
        uint64_t best_ = UINT64_MAX, one_;                  \
        for (int b_ = 0; b_ < BATCHES; b_++) {              \
            BATCH_TICKS(expr, one_);                        \
            if (one_ < best_)                               \
                best_ = one_;                               \
        }                                                   \
        (out) = best_;                                      \
    } while (0)

static uint64_t kernel_read(void)
{
    struct timespec ts;
    fc_kernel_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_nsec;
}

/* The counter's granularity, in ticks (0: not measured, taken as 1).  A
 * counter that ticks more slowly than it can be read (arm64's generic timer
 * at 1-50 MHz; qemu-user's, which moves in 1 us steps) returns the same
 * value to back-to-back reads: a sample's two reads may then be up to a
 * step off the instants they bracket, and calibration charges that. */
static _Atomic uint64_t step_ticks;

static uint64_t measure_step(void);

uint64_t fc_counter_step(void)
{
    uint64_t s = atomic_load_explicit(&step_ticks, memory_order_relaxed);
    if (FC_LIKELY(s))
        return s;
    if (fc_seam.counter)
        return 1;
    s = measure_step();
    atomic_store_explicit(&step_ticks, s, memory_order_relaxed);
    return s;
}

/* Back-to-back ordered reads: where they repeat, the first change is one
 * step (at most a few us on any real counter); where they never repeat, the
 * counter is finer than a read and its step is taken as one tick. */
static uint64_t measure_step(void)
{
    uint64_t best = UINT64_MAX;
    int repeated = 0;
    for (int k = 0; k < 3; k++) {
        uint64_t a = fc_counter_ordered(), b;
        int n = 0;
        do
            b = fc_counter_ordered();
        while (b == a && ++n < 200000);
        repeated |= n > 0;
        if (b > a && b - a < best)
            best = b - a;
    }
    return repeated && best != UINT64_MAX ? best : 1;
}

/* Measured costs, ns per read (0: not measured): written with the first line. */
static _Atomic double read_cost_ns, kernel_cost_ns;
static _Atomic int rdtscp_present;

int fc_counter_has_rdtscp(void)
{
    return atomic_load_explicit(&rdtscp_present, memory_order_relaxed);
}

void fc_counter_costs(double *ours, double *kernel)
{
    *ours = atomic_load_explicit(&read_cost_ns, memory_order_relaxed);
    *kernel = atomic_load_explicit(&kernel_cost_ns, memory_order_relaxed);
}

void fc_counter_note_read_cost(double ns)
{
    atomic_store_explicit(&read_cost_ns, ns, memory_order_relaxed);
}

/* Ticks for BATCH calls of fn, best of BATCHES batches. */
uint64_t fc_counter_time_calls(int64_t (*fn)(void))
{
    volatile uint64_t sink = 0;
    uint64_t ticks;
    BEST_OF((uint64_t)fn(), ticks);
    (void)sink;
    return ticks;
}

uint32_t fc_counter_early_flags;

static _Atomic int chosen_plus1; /* fc_counter_choose's instruction + 1; 0: none chosen yet */
static _Atomic double chosen_ratio;

int fc_counter_chosen(void)
{
    return atomic_load_explicit(&chosen_plus1, memory_order_relaxed) - 1;
}

double fc_counter_chosen_ratio(void)
{
    return atomic_load_explicit(&chosen_ratio, memory_order_relaxed);
}

#if defined(__x86_64__) || defined(__i386__)
/* What the CPU says about lfence, asked once per process (CPUIDs trap in a
 * VM): LFENCE_ORDERS, lfence keeps rdtsc behind earlier instructions (cpu.h);
 * LFENCE_AMD, the vendor is AMD or Hygon. */
#define LFENCE_ORDERS 1
#define LFENCE_AMD 2
static _Atomic int lfence_facts_plus1; /* 0: not asked yet */

static int lfence_facts(void)
{
    int f = atomic_load_explicit(&lfence_facts_plus1, memory_order_relaxed);
    if (f)
        return f - 1;
    int amd = 0, orders;
    if (fc_seam.cpu) {
        amd = fc_cpu_vendor_is_amd(fc_seam.cpu->vendor);
        orders = fc_cpu_lfence_orders_rdtsc_for(fc_seam.cpu->vendor, fc_seam.cpu->family,
                                                fc_seam.cpu->lfence_always_serializing);
    } else {
        orders = fc_cpu_lfence_orders_rdtsc(&amd); /* one CPUID on Intel */
    }
    f = (orders ? LFENCE_ORDERS : 0) | (amd ? LFENCE_AMD : 0);
    atomic_store_explicit(&lfence_facts_plus1, f + 1, memory_order_relaxed);
    return f;
}
#endif

void fc_counter_order_early(void)
{
#if defined(__x86_64__) || defined(__i386__)
    if (fc_seam.counter)
        return; /* a simulated counter: no instruction to choose */
    if (lfence_facts() & LFENCE_ORDERS)
        return;
    if (fc_seam.cpu ? fc_seam.cpu->has_rdtscp : fc_cpu_has_rdtscp())
        __atomic_store_n(&fc_counter_early_flags, FC_READ_RDTSCP, __ATOMIC_RELAXED);
#endif
}

void fc_counter_reset_for_tests(void)
{
    __atomic_store_n(&fc_counter_early_flags, 0u, __ATOMIC_SEQ_CST);
#if defined(__x86_64__) || defined(__i386__)
    atomic_store(&lfence_facts_plus1, 0);
#endif
    atomic_store(&chosen_plus1, 0);
    atomic_store(&chosen_ratio, 0.0);
    atomic_store(&read_cost_ns, 0.0);
    atomic_store(&kernel_cost_ns, 0.0);
    atomic_store(&rdtscp_present, 0);
    atomic_store(&step_ticks, 0);
    fc_counter_time_wall(0);
}

/* The median of n > 0 values (sorts them in place; not qsort: the decision
 * may run in a signal handler, and glibc's qsort may allocate). */
static double median(double *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            double x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* a / b as the median of the rounds' ratios, or from the best batches where
 * the counter is too coarse to time a batch (qemu's moves in 1 us steps). */
static double paired_ratio(const uint64_t *a, const uint64_t *b, int n, uint64_t best_a, uint64_t best_b)
{
    double r[CHOOSE_ROUNDS];
    int k = 0;
    for (int i = 0; i < n; i++)
        if (b[i] > 0)
            r[k++] = (double)a[i] / (double)b[i];
    if (k > n / 2)
        return median(r, k);
    return best_b ? (double)best_a / (double)best_b : (best_a ? 1e9 : 1.0);
}

/*
 * Mode tsc's ordered wall reads, where the kernel's clocksource is the
 * counter.  The vDSO's REALTIME is then the kernel's counter read, a seqlock
 * and a multiply; the line's is the line's MONOTONIC plus the offset check,
 * a call of the vDSO's CLOCK_REALTIME_COARSE (wall.h).  Which costs less is
 * the CPU's affair: the check costs 3-7 ns beside a fenced read, and the
 * kernel's counter read is rdtscp wherever the CPU has it, ours the cheaper
 * fence.  Measured (ns): on an Intel Xeon guest the kernel's REALTIME is the
 * cheaper (the unordered line read plus check alone cost 15 against rdtsc's
 * 8); on an AMD EPYC family 1Ah guest the line's (19.0 against 20.7: our
 * lfence;rdtsc costs 15.1, the kernel's rdtscp 17.2).
 *
 * So both are timed, interleaved as the instruction is, right after it is
 * chosen: the vDSO's REALTIME against a model of the line's read -- the
 * seqlock's loads around the chosen fenced read, the multiply, the coarse
 * call and compare.  The model omits the line's route tests; on the AMD
 * guest it came out the dearer side of the whole read: the kernel's
 * REALTIME timed at 1.065-1.089x it in 300 fresh choices (quiet; 1.08-1.13
 * beside a busy loop), where the whole reads differ by 1.09-1.10x.  The
 * prior is the kernel's clock, which costs what libc's does: the line
 * answers only where the kernel's read costs 1.04x the model or more,
 * measured twice (the nearer of the two decides).  Either answer
 * keeps every guarantee (the line's real_error_bound_ns is its MONOTONIC
 * bound; the kernel's, 0); what is at stake is a few ns.
 */
int fc_counter_wall_kernel;
static _Atomic int wall_candidate; /* the vDSO's REALTIME is a candidate: time it (refclock.h has it) */
static _Atomic double wall_first, wall_again; /* the timings (0: not timed; again: not measured again) */

void fc_counter_time_wall(int candidate)
{
    atomic_store_explicit(&wall_candidate, candidate, memory_order_relaxed);
    atomic_store_explicit(&wall_first, 0.0, memory_order_relaxed);
    atomic_store_explicit(&wall_again, 0.0, memory_order_relaxed);
    __atomic_store_n(&fc_counter_wall_kernel, 0, __ATOMIC_RELAXED);
}

void fc_counter_wall_timings(double *first, double *again)
{
    *first = atomic_load_explicit(&wall_first, memory_order_relaxed);
    *again = atomic_load_explicit(&wall_again, memory_order_relaxed);
}

int fc_counter_wall_rule(double first, double again)
{
    return !(first >= WALL_LINE_MARGIN && again >= WALL_LINE_MARGIN);
}

double fc_counter_wall_ratio(void)
{
    double first, again;
    fc_counter_wall_timings(&first, &again);
    return again > 0 && again < first ? again : first;
}

/* The model's line: read, never written, as a line is read (loads the
 * compiler must make on every call: the fenced read's asm clobbers memory). */
static struct {
    _Atomic uint64_t seq;
    uint64_t base, mult, frac;
    int64_t ns, coarse;
} wall_model;

static uint64_t wall_model_read(uint32_t flags, int (*vdso)(clockid_t, struct timespec *))
{
    uint64_t seq, t, base, mult, frac;
    do {
        seq = atomic_load_explicit(&wall_model.seq, memory_order_acquire);
        base = FC_LOAD(&wall_model.base);
        mult = FC_LOAD(&wall_model.mult);
        frac = FC_LOAD(&wall_model.frac);
        t = fc_counter_fenced(flags);
        atomic_thread_fence(memory_order_acquire);
    } while (FC_UNLIKELY(seq != atomic_load_explicit(&wall_model.seq, memory_order_relaxed)));
    uint64_t mono = (uint64_t)FC_LOAD(&wall_model.ns) + (((t - base) * mult + frac) >> 32);
    struct timespec ts;
    vdso(CLOCK_REALTIME_COARSE, &ts);
    int64_t coarse = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    if (FC_UNLIKELY(coarse != FC_LOAD(&wall_model.coarse)))
        __atomic_store_n(&wall_model.coarse, coarse, __ATOMIC_RELAXED); /* once a tick, as the check */
    return mono + (uint64_t)coarse;
}

static uint64_t wall_kernel_read(int (*vdso)(clockid_t, struct timespec *))
{
    struct timespec ts;
    vdso(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_nsec;
}

/* The kernel's REALTIME over the model, paired rounds. */
static double wall_time(uint32_t flags, int (*vdso)(clockid_t, struct timespec *))
{
    volatile uint64_t sink = 0;
    uint64_t line[WALL_ROUNDS], kernel[WALL_ROUNDS], best_l = UINT64_MAX, best_k = UINT64_MAX;
    for (int r = 0; r < WALL_ROUNDS; r++) {
        BATCH_TICKS_N(wall_model_read(flags, vdso), WALL_BATCH, line[r]);
        BATCH_TICKS_N(wall_kernel_read(vdso), WALL_BATCH, kernel[r]);
        best_l = line[r] < best_l ? line[r] : best_l;
        best_k = kernel[r] < best_k ? kernel[r] : best_k;
    }
    (void)sink;
    return paired_ratio(kernel, line, WALL_ROUNDS, best_k, best_l);
}

/* With the instruction chosen (flags): who answers the ordered wall reads. */
static void wall_choose(uint32_t flags)
{
    int (*vdso)(clockid_t, struct timespec *) =
        atomic_load_explicit(&wall_candidate, memory_order_relaxed) ? fc_refclock_vdso_gettime() : 0;
    if (!vdso)
        return; /* the line answers: the kernel's clock does not read the counter */
    int to_kernel = 1;
    double first = 0, again = 0;
    if (fc_seam.wall_route != 0)
        to_kernel = fc_seam.wall_route > 0;
    else if (!fc_seam.counter && !(flags & FC_READ_ORDERED_KERNEL)) {
        /* (else nothing to time; or the kernel answers the ordered reads anyway) */
        first = wall_time(flags, vdso);
        again = first >= WALL_LINE_MARGIN ? wall_time(flags, vdso) : 0;
        to_kernel = fc_counter_wall_rule(first, again);
    }
    atomic_store_explicit(&wall_first, first, memory_order_relaxed);
    atomic_store_explicit(&wall_again, again, memory_order_relaxed);
    __atomic_store_n(&fc_counter_wall_kernel, to_kernel, __ATOMIC_RELAXED);
}

/* The test seam's word on the kernel routes (0: the measurement's). */
static uint32_t seam_route(uint32_t flags)
{
    const uint32_t routes = FC_READ_ORDERED_KERNEL | FC_READ_KERNEL;
    if (fc_seam.ordered_route > 1)
        return flags | routes;
    if (fc_seam.ordered_route == 1)
        return (flags & ~routes) | FC_READ_ORDERED_KERNEL;
    if (fc_seam.ordered_route < 0)
        return flags & ~routes;
    return flags;
}

/*
 * The candidates are timed in interleaved rounds -- a batch of each, one
 * after another -- and compared by the median of each round's ratio, not by
 * two minima taken at different moments: a disturbance that comes and goes
 * (a busy SMT sibling on the host, a preempted vCPU) then hits both sides
 * of a ratio alike.  Timed one after the other (5 batches each), a CPU hog
 * beside the process made lfence;rdtsc look 10% cheaper than rdtscp in 3 of
 * 50 fresh processes on a machine where they cost the same.  Paired, with a
 * margin of 1.10, it still did in 2 of several hundred (rdtscp 0.97x
 * lfence;rdtsc quiet, an Intel Xeon guest beside a busy loop).
 *
 * So each CPU starts from the instruction its vendor makes the cheaper one,
 * and leaves it only for the other when that is clearly cheaper: 1.25x,
 * measured again and past it again.  Intel: rdtscp (within a few % of
 * lfence;rdtsc: 0.96-1.0x on Xeon guests), also the kernel's preference.
 * AMD and Hygon, where lfence orders rdtsc: lfence;rdtsc, since rdtscp is
 * the dearer instruction there (1.12-1.19x it in 100 fresh processes on an
 * EPYC family 1Ah guest, quiet or beside a busy loop) -- a ratio that no
 * margin around 1 would tell reliably from Intel's.  Either instruction
 * keeps every guarantee; what is at stake is a few ns, and the same choice
 * in every process.
 */

double fc_counter_nearer_ratio(int lfence_expected_cheaper, double first, double again)
{
    if (lfence_expected_cheaper)
        return again > first ? again : first;
    return again < first ? again : first;
}

int fc_counter_prefer_rdtscp(int has_rdtscp, int lfence_orders, int lfence_expected_cheaper,
                             double rdtscp_over_lfence)
{
    if (!has_rdtscp)
        return 0;
    if (!lfence_orders)
        return 1;
    return lfence_expected_cheaper ? rdtscp_over_lfence < 1 / RDTSCP_MARGIN
                                   : rdtscp_over_lfence <= RDTSCP_MARGIN;
}

double fc_counter_kernel_over_rdtscp(double clearly_above)
{
    if (!FC_HAVE_PERCPU || fc_seam.counter || !(fc_seam.cpu ? fc_seam.cpu->has_rdtscp : fc_cpu_has_rdtscp()))
        return 0;
    volatile uint64_t sink = 0;
    uint64_t rdtscp[KERNEL_ROUNDS], kernel[KERNEL_ROUNDS];
    uint64_t best_p = UINT64_MAX, best_k = UINT64_MAX;
    for (int r = 0; r < KERNEL_ROUNDS; r++) {
        BATCH_TICKS(fc_counter_rdtscp_only(), rdtscp[r]);
        BATCH_TICKS(kernel_read(), kernel[r]);
        best_p = rdtscp[r] < best_p ? rdtscp[r] : best_p;
        best_k = kernel[r] < best_k ? kernel[r] : best_k;
        /* A kernel read through a system call (hpet: ~1 us) answers in three
         * rounds: all of them far above, no need for the rest. */
        if (r == 2 && clearly_above > 0) {
            double q = paired_ratio(kernel, rdtscp, 3, best_k, best_p);
            if (q > clearly_above)
                return q;
        }
    }
    (void)sink;
    return paired_ratio(kernel, rdtscp, KERNEL_ROUNDS, best_k, best_p);
}

/* The counter reads the kernel's clock is weighed against. */
enum counter_read { READ_LFENCE, READ_RDTSCP, READ_BARE };

FC_INLINE uint64_t counter_read(enum counter_read which)
{
    return which == READ_RDTSCP ? fc_counter_rdtscp_only()
           : which == READ_BARE ? fc_counter_unordered()
                                : fc_counter_lfence();
}

/* The kernel's read over the counter read `which`, paired rounds. */
static double kernel_over(enum counter_read which)
{
    volatile uint64_t sink = 0;
    uint64_t c[CHOOSE_ROUNDS], k[CHOOSE_ROUNDS], best_c = UINT64_MAX, best_k = UINT64_MAX;
    for (int r = 0; r < CHOOSE_ROUNDS; r++) {
        BATCH_TICKS(counter_read(which), c[r]);
        BATCH_TICKS(kernel_read(), k[r]);
        best_c = c[r] < best_c ? c[r] : best_c;
        best_k = k[r] < best_k ? k[r] : best_k;
    }
    (void)sink;
    return paired_ratio(k, c, CHOOSE_ROUNDS, best_k, best_c);
}

/* The kernel's clock answers only where it is clearly cheaper, in two
 * measurements, as the fence choice leaves the vendor's instruction only on
 * two: a counter that traps (1-2 us in a VM) against a system-call
 * clocksource (hpet: as slow) is a near case, and one measurement would let
 * noise decide it differently from one run to the next.  `first` under the
 * margin is measured again, and the larger stands. */
static double kernel_over_twice(double first, enum counter_read which)
{
    if (first >= KERNEL_MARGIN)
        return first;
    double again = kernel_over(which);
    return again > first ? again : first;
}

uint32_t fc_counter_choose(double ns_per_tick)
{
    if (fc_seam.counter) {
        uint32_t flags = seam_route(0); /* a simulated counter: nothing to time */
        wall_choose(flags);
        return flags;
    }
    volatile uint64_t sink = 0;
    uint64_t lfence[CHOOSE_ROUNDS], rdtscp[CHOOSE_ROUNDS], kernel[CHOOSE_ROUNDS];
    uint64_t best_l = UINT64_MAX, best_p = UINT64_MAX, best_k = UINT64_MAX;
    int has_rdtscp = fc_seam.cpu ? fc_seam.cpu->has_rdtscp : fc_cpu_has_rdtscp();
    atomic_store_explicit(&rdtscp_present, FC_HAVE_PERCPU && has_rdtscp, memory_order_relaxed);
#if defined(__aarch64__)
    /* arm64: the alternative is CNTVCTSS_EL0 (no ISB), where FEAT_ECV has it. */
    has_rdtscp = fc_cpu_counter_self_synced();
#endif
    for (int r = 0; r < CHOOSE_ROUNDS; r++) {
        BATCH_TICKS(fc_counter_lfence(), lfence[r]);
        rdtscp[r] = 0;
        if (has_rdtscp)
            BATCH_TICKS(fc_counter_rdtscp_only(), rdtscp[r]);
        BATCH_TICKS(kernel_read(), kernel[r]);
        best_l = lfence[r] < best_l ? lfence[r] : best_l;
        best_p = rdtscp[r] < best_p ? rdtscp[r] : best_p;
        best_k = kernel[r] < best_k ? kernel[r] : best_k;
    }
    (void)sink;

    uint32_t flags = 0;
    const uint64_t *ordered = lfence;
    uint64_t best_o = best_l;
    double ratio = has_rdtscp ? paired_ratio(rdtscp, lfence, CHOOSE_ROUNDS, best_p, best_l) : 0;
    /* The CPU's word (asked by the decision already: no CPUID here). */
    int lfence_orders = 1, lfence_cheaper = 0;
#if defined(__x86_64__) || defined(__i386__)
    if (has_rdtscp) {
        int facts = lfence_facts();
        lfence_orders = (facts & LFENCE_ORDERS) != 0;
        lfence_cheaper = lfence_orders && (facts & LFENCE_AMD);
    }
#endif
    /* A ratio that would leave the vendor's instruction (rdtscp unless
     * lfence_cheaper: the rule below on this ratio picks the other) is
     * measured again, and taken only if the second measurement leaves it too. */
    int leaves = fc_counter_prefer_rdtscp(has_rdtscp, lfence_orders, lfence_cheaper, ratio) == lfence_cheaper;
    if (has_rdtscp && lfence_orders && leaves) {
        uint64_t l2[CHOOSE_ROUNDS], p2[CHOOSE_ROUNDS], best_l2 = UINT64_MAX, best_p2 = UINT64_MAX;
        for (int r = 0; r < CHOOSE_ROUNDS; r++) {
            BATCH_TICKS(fc_counter_lfence(), l2[r]);
            BATCH_TICKS(fc_counter_rdtscp_only(), p2[r]);
            best_l2 = l2[r] < best_l2 ? l2[r] : best_l2;
            best_p2 = p2[r] < best_p2 ? p2[r] : best_p2;
        }
        ratio = fc_counter_nearer_ratio(lfence_cheaper, ratio, paired_ratio(p2, l2, CHOOSE_ROUNDS, best_p2, best_l2));
    }
    if (fc_counter_prefer_rdtscp(has_rdtscp, lfence_orders, lfence_cheaper, ratio)) {
        flags |= FC_READ_RDTSCP;
        ordered = rdtscp;
        best_o = best_p;
    }
    double k_ratio = paired_ratio(kernel, ordered, CHOOSE_ROUNDS, best_k, best_o);
    if (kernel_over_twice(k_ratio, (flags & FC_READ_RDTSCP) ? READ_RDTSCP : READ_LFENCE) < KERNEL_MARGIN) {
        flags |= FC_READ_ORDERED_KERNEL;
        /* Under half even a bare counter read (a counter that traps)?  Asked
         * only here: the bare read costs no more than the fenced one, so
         * nowhere else can the answer be yes. */
        if (kernel_over_twice(kernel_over(READ_BARE), READ_BARE) < KERNEL_MARGIN)
            flags |= FC_READ_KERNEL;
    }
    /* The whole read's cost is measured by clock.c once it can run. */
    atomic_store_explicit(&kernel_cost_ns, (double)best_k * ns_per_tick / BATCH, memory_order_relaxed);
    atomic_store_explicit(&chosen_ratio, ratio, memory_order_relaxed);
    atomic_store_explicit(&chosen_plus1, (int)(flags & FC_READ_RDTSCP) + 1, memory_order_relaxed);
    flags = seam_route(flags);
    wall_choose(flags);
    return flags;
}
