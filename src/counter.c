/*
 * Which instruction the ordered reads use, and whether the kernel's clock is
 * so much cheaper here that ordered reads should go to it.
 *
 * arm64 has the same choice: isb;mrs cntvct_el0 or, with FEAT_ECV, the
 * self-synchronised mrs cntvctss_el0 (counter.h), in the FC_READ_RDTSCP slot.
 *
 * Both lfence;rdtsc and rdtscp keep the counter read behind every earlier
 * load, which is the cross-thread guarantee (tests/guarantees_test.cc proves
 * it with a check_tsc_warp-style test, whichever is chosen).  The kernel's
 * rdtsc_ordered() prefers rdtscp where the CPU has it; so do we, unless
 * lfence;rdtsc is clearly cheaper.  The kernel's clock wins only when it
 * costs under half of an ordered counter read -- a counter that traps in a
 * VM, say -- never on a close call, so the same machine makes the same
 * choice every time.
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
#define RDTSCP_MARGIN 1.10  /* rdtscp unless it costs 10% more than lfence;rdtsc */
#define KERNEL_MARGIN 0.50  /* the kernel only if it costs under half */

/* Best of BATCHES batches of BATCH reads, in counter ticks per batch. */
#define BEST_OF(expr, out)                                  \
    do {                                                    \
        uint64_t best_ = UINT64_MAX;                        \
        for (int b_ = 0; b_ < BATCHES; b_++) {              \
            uint64_t t0_ = fc_counter_lfence();             \
            for (int i_ = 0; i_ < BATCH; i_++)              \
                sink += (expr);                             \
            uint64_t t1_ = fc_counter_lfence();             \
            if (t1_ - t0_ < best_)                          \
                best_ = t1_ - t0_;                          \
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

void fc_counter_reset_for_tests(void)
{
    atomic_store(&read_cost_ns, 0.0);
    atomic_store(&kernel_cost_ns, 0.0);
    atomic_store(&rdtscp_present, 0);
    atomic_store(&step_ticks, 0);
}

uint32_t fc_counter_choose(double ns_per_tick)
{
    volatile uint64_t sink = 0;
    uint64_t lfence, rdtscp = UINT64_MAX, kernel;
    int has_rdtscp = fc_seam.cpu ? fc_seam.cpu->has_rdtscp : fc_cpu_has_rdtscp();
    atomic_store_explicit(&rdtscp_present, FC_HAVE_PERCPU && has_rdtscp, memory_order_relaxed);
#if defined(__aarch64__)
    /* arm64: the alternative is CNTVCTSS_EL0 (no ISB), where FEAT_ECV has it. */
    has_rdtscp = fc_cpu_counter_self_synced();
#endif
    BEST_OF(fc_counter_lfence(), lfence);
    if (has_rdtscp)
        BEST_OF(fc_counter_rdtscp_only(), rdtscp);
    BEST_OF(kernel_read(), kernel);
    (void)sink;

    uint32_t flags = 0;
    uint64_t ordered = lfence;
    if (has_rdtscp && (double)rdtscp <= RDTSCP_MARGIN * (double)lfence) {
        flags |= FC_READ_RDTSCP;
        ordered = rdtscp;
    }
    if ((double)kernel < KERNEL_MARGIN * (double)ordered)
        flags |= FC_READ_ORDERED_KERNEL;
    /* The whole read's cost is measured by clock.c once it can run. */
    atomic_store_explicit(&kernel_cost_ns, (double)kernel * ns_per_tick / BATCH, memory_order_relaxed);
    return flags;
}
