/* The hardware counter: how to read it, ordered or not.  One place per arch. */
#ifndef FC_COUNTER_H
#define FC_COUNTER_H

#include <stdint.h>

/* How ordered reads read the counter (global latch only; written once by the
 * mode decision, before the first line, and never again). */
#define FC_READ_RDTSCP 1u          /* rdtscp rather than lfence;rdtsc */
#define FC_READ_ORDERED_KERNEL 2u  /* the kernel's clock is clearly cheaper here */

#if defined(__x86_64__) || defined(__i386__)
#define FC_HAVE_COUNTER 1
/* The kernel's name for this counter as a clocksource. */
#define FC_COUNTER_CLOCKSOURCE "tsc"

/* Bare rdtsc: cheapest, but the CPU may execute it before earlier loads. */
static inline __attribute__((always_inline)) uint64_t fc_counter_unordered(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

/* lfence;rdtsc: the counter is sampled only after every earlier instruction
 * (in particular the loads that acquired a lock) has completed.  Linux sets
 * lfence dispatch-serialising on AMD too, which is what rdtsc_ordered relies on. */
static inline __attribute__((always_inline)) uint64_t fc_counter_lfence(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("lfence\n\trdtsc" : "=a"(lo), "=d"(hi) :: "memory");
    return ((uint64_t)hi << 32) | lo;
}

/* rdtscp waits until every earlier instruction has executed and every
 * earlier load is globally visible: the same guarantee, and the kernel's
 * first choice for rdtsc_ordered() where the CPU has it. */
static inline __attribute__((always_inline)) uint64_t fc_counter_rdtscp_only(void)
{
    uint32_t lo, hi, c;
    __asm__ __volatile__("rdtscp" : "=a"(lo), "=d"(hi), "=c"(c) :: "memory");
    (void)c;
    return ((uint64_t)hi << 32) | lo;
}

/* The ordered read the library's own bookkeeping uses (calibration samples). */
static inline __attribute__((always_inline)) uint64_t fc_counter_ordered(void)
{
    return fc_counter_lfence();
}

/* rdtscp also returns IA32_TSC_AUX, which Linux sets to (node << 12) | cpu. */
static inline __attribute__((always_inline)) uint64_t fc_counter_rdtscp(uint32_t *aux)
{
    uint32_t lo, hi, c;
    __asm__ __volatile__("rdtscp" : "=a"(lo), "=d"(hi), "=c"(c) :: "memory");
    *aux = c;
    return ((uint64_t)hi << 32) | lo;
}

static inline __attribute__((always_inline)) void fc_cpu_relax(void)
{
    __asm__ __volatile__("pause" ::: "memory");
}

#elif defined(__aarch64__)
#define FC_HAVE_COUNTER 1
#define FC_COUNTER_CLOCKSOURCE "arch_sys_counter"

/* The generic timer's virtual count.  Synchronised across cores by the architecture. */
static inline __attribute__((always_inline)) uint64_t fc_counter_unordered(void)
{
    uint64_t v;
    __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
    return v;
}

static inline __attribute__((always_inline)) uint64_t fc_counter_ordered(void)
{
    uint64_t v;
    __asm__ __volatile__("isb\n\tmrs %0, cntvct_el0" : "=r"(v) :: "memory");
    return v;
}
static inline __attribute__((always_inline)) uint64_t fc_counter_lfence(void) { return fc_counter_ordered(); }
static inline __attribute__((always_inline)) uint64_t fc_counter_rdtscp_only(void) { return fc_counter_ordered(); }

static inline __attribute__((always_inline)) uint64_t fc_counter_rdtscp(uint32_t *aux)
{
    *aux = 0;
    return fc_counter_ordered();
}

static inline __attribute__((always_inline)) void fc_cpu_relax(void)
{
    __asm__ __volatile__("yield" ::: "memory");
}

#else
#define FC_HAVE_COUNTER 0
#define FC_COUNTER_CLOCKSOURCE "tsc"
static inline uint64_t fc_counter_unordered(void) { return 0; }
static inline uint64_t fc_counter_ordered(void) { return 0; }
static inline uint64_t fc_counter_lfence(void) { return 0; }
static inline uint64_t fc_counter_rdtscp_only(void) { return 0; }
static inline uint64_t fc_counter_rdtscp(uint32_t *aux) { *aux = 0; return 0; }
static inline void fc_cpu_relax(void) {}

#endif

/* counter.c: the ordered read's instruction (FC_READ_* of line.h), chosen
 * by measuring it against the kernel's clock (whose cost it keeps). */
uint32_t fc_counter_choose(double ns_per_tick);
/* Counter ticks for 16 calls of fn, best of a few batches; and the cost of a
 * whole read that a caller measured with it, kept for fastclock_status. */
uint64_t fc_counter_time_calls(int64_t (*fn)(void));
void fc_counter_note_read_cost(double ns);
/* The costs measured: the ordered read, the kernel's clock (0: not yet). */
void fc_counter_costs(double *ours, double *kernel);
void fc_counter_reset_for_tests(void);
/* 1 when the CPU has rdtscp (known once fc_counter_choose ran). */
int fc_counter_has_rdtscp(void);

#endif
