/* The hardware counter: how to read it, ordered or not.  One place per arch. */
#ifndef FC_COUNTER_H
#define FC_COUNTER_H

#include <stdint.h>
#include <time.h>

/* How ordered reads read the counter (global latch only; written once by the
 * mode decision, before the first line, and never again). */
#define FC_READ_RDTSCP 1u          /* rdtscp rather than lfence;rdtsc */
#define FC_READ_ORDERED_KERNEL 2u  /* the kernel's clock is clearly cheaper here: ordered
                                      reads are the kernel's, in every mode, from the first
                                      line on (clock.c) */
#define FC_READ_KERNEL 4u          /* ... even than a bare counter read (set with the bit
                                      above): every fine read is the kernel's, and the
                                      global line is published with fast_span 0 */

#if defined(__x86_64__) || defined(__i386__)
#define FC_HAVE_COUNTER 1
/* The kernel's name for this counter as a clocksource. */
#define FC_COUNTER_CLOCKSOURCE "tsc"
/* Words for reasons and status: the counter, and its three reads. */
#define FC_COUNTER_NAME "TSC"
#define FC_COUNTER_INSN_UNORDERED "rdtsc"
#define FC_COUNTER_INSN_ORDERED "lfence;rdtsc"
#define FC_COUNTER_INSN_ALT "rdtscp"
/* tsc-percpu: rdtscp names the CPU whose counter was read. */
#define FC_HAVE_PERCPU 1
/* Timer errata the kernel works around by trapping the counter: arm64's (kernel.h). */
#define FC_COUNTER_ERRATA 0
#define FC_DISTRUST_HINT "which happens when the kernel marked it unstable"
#define FC_COUNTER_INVARIANT "the TSC is invariant and "
#define FC_NO_PERCPU_REASON "it needs rdtscp, which this CPU lacks"

/* Bare rdtsc: cheapest, but the CPU may execute it before earlier loads.
 * The halves are register-wide outputs: on x86-64 rdtsc clears the upper
 * halves of rax and rdx, and saying so spares the zero-extending mov that a
 * 32-bit output costs (on i386 they are the 32-bit registers themselves).
 * The "memory" clobber (no instruction) keeps the compiler from moving it
 * across the seqlock's loads, as the CPU's window is all the line's
 * writer allows for (line.h fc_line_read). */
static inline __attribute__((always_inline)) uint64_t fc_counter_unordered(void)
{
    unsigned long lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi) :: "memory");
    return ((uint64_t)hi << 32) | lo;
}

/* lfence;rdtsc: the counter is sampled only after every earlier instruction
 * (in particular the loads that acquired a lock) has completed -- on Intel,
 * and on AMD where lfence is dispatch-serialising (cpu.h: some families
 * only once the kernel set DE_CFG[1], which a guest cannot see; there the
 * read paths and fc_now_counter take rdtscp). */
static inline __attribute__((always_inline)) uint64_t fc_counter_lfence(void)
{
    unsigned long lo, hi; /* register-wide: as fc_counter_unordered */
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

/* lfence;rdtsc by name: the counter's granularity measurement and the CLI
 * (the library's ordered bookkeeping reads go through fc_now_counter, which
 * follows the read paths' choice). */
static inline __attribute__((always_inline)) uint64_t fc_counter_ordered(void)
{
    return fc_counter_lfence();
}

/* rdtscp also returns IA32_TSC_AUX, which Linux sets to (node << 12) | cpu.
 * 32-bit outputs here, unlike rdtsc's above: register-wide ones measured
 * 0.35 ns dearer in the per-CPU read on an Intel guest, every run. */
static inline __attribute__((always_inline)) uint64_t fc_counter_rdtscp(uint32_t *aux)
{
    uint32_t lo, hi, c;
    __asm__ __volatile__("rdtscp" : "=a"(lo), "=d"(hi), "=c"(c) :: "memory");
    *aux = c;
    return ((uint64_t)hi << 32) | lo;
}

/* The hot path's ordered read (line.h): the counter's two halves as the
 * instruction leaves them, rax = low and rdx = high, each zero-extended
 * (rdtsc clears the upper halves), so that the line's arithmetic can start
 * on the low half without first combining the two (two cycles on the chain
 * that the next fenced read waits for).  The flags choose the instruction
 * (here only: fc_counter_fenced below is built on it); same clobbers as the
 * reads above. */
#if defined(__x86_64__) /* i386's "=a" of a 64-bit value would mean edx:eax */
#define FC_COUNTER_HALVES 1
static inline __attribute__((always_inline)) void fc_counter_fenced_halves(uint32_t flags, uint64_t *lo,
                                                                           uint64_t *hi)
{
    if (flags & FC_READ_RDTSCP) {
        uint64_t c;
        __asm__ __volatile__("rdtscp" : "=a"(*lo), "=d"(*hi), "=c"(c) :: "memory");
        (void)c;
    } else {
        __asm__ __volatile__("lfence\n\trdtsc" : "=a"(*lo), "=d"(*hi) :: "memory");
    }
}
#else
#define FC_COUNTER_HALVES 0
#endif

static inline __attribute__((always_inline)) void fc_cpu_relax(void)
{
    __asm__ __volatile__("pause" ::: "memory");
}

#elif defined(__aarch64__)
#define FC_HAVE_COUNTER 1
/* The kernel's name for this counter as a clocksource. */
#define FC_COUNTER_CLOCKSOURCE "arch_sys_counter"
#define FC_COUNTER_NAME "counter"
#define FC_COUNTER_INSN_UNORDERED "cntvct_el0"
#define FC_COUNTER_INSN_ORDERED "isb;cntvct_el0"
#define FC_COUNTER_INSN_ALT "cntvctss_el0"
#define FC_DISTRUST_HINT "so the kernel does not offer it here"
#define FC_COUNTER_INVARIANT "the generic timer's counter (cntvct_el0) runs at a fixed rate and "
#define FC_COUNTER_ERRATA 1
#define FC_HAVE_PERCPU 0
/* One register holds the count: nothing to gain from reading it in halves. */
#define FC_COUNTER_HALVES 0
/* Short: it ends reasons that have said other things first (256 bytes). */
#define FC_NO_PERCPU_REASON "tsc-percpu is not available on arm64 (no rdtscp to name the CPU)"

/*
 * arm64: the generic timer's virtual count, CNTVCT_EL0, at CNTFRQ_EL0 Hz.
 * One system-wide count that the architecture keeps in step across cores,
 * so there is no per-CPU mode here (nor an instruction that names the CPU).
 *
 * The memory model: a read of CNTVCT_EL0 is not a memory access, and the
 * architecture lets it execute speculatively and out of order relative to
 * any other instruction, loads and stores included.  The bare read is the
 * `_unordered` flavour (the counterpart of a bare rdtsc).  The ordered read
 * is the kernel vDSO's: an ISB first, so the counter is read only after
 * every earlier instruction (the loads that acquired a lock among them) has
 * completed; then a false address dependency on the value (a load from the
 * stack at sp + (v ^ v)), so no later load can be satisfied before the
 * counter was read -- the kernel's arch_counter_enforce_ordering.  With
 * FEAT_ECV the CPU has CNTVCTSS_EL0, the self-synchronised view of the same
 * count, which needs no ISB (HWCAP2_ECV; chosen in counter.c).
 */
static inline __attribute__((always_inline)) void fc_counter_order_after(uint64_t v)
{
    uint64_t tmp;
    __asm__ __volatile__("eor %0, %1, %1\n\t"
                         "add %0, sp, %0\n\t"
                         "ldr xzr, [%0]"
                         : "=&r"(tmp) : "r"(v) : "memory");
}

/* Bare mrs: cheapest, but the CPU may read the count early or late (the
 * clobber: as rdtsc's above). */
static inline __attribute__((always_inline)) uint64_t fc_counter_unordered(void)
{
    uint64_t v;
    __asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v) :: "memory");
    return v;
}

/* isb; mrs cntvct_el0, then the dependency: the kernel's ordered read. */
static inline __attribute__((always_inline)) uint64_t fc_counter_lfence(void)
{
    uint64_t v;
    __asm__ __volatile__("isb\n\tmrs %0, cntvct_el0" : "=r"(v) :: "memory");
    fc_counter_order_after(v);
    return v;
}

/* mrs cntvctss_el0 (S3_3_C14_C0_6, FEAT_ECV), then the dependency.  Only
 * where getauxval(AT_HWCAP2) & HWCAP2_ECV: elsewhere it is undefined. */
static inline __attribute__((always_inline)) uint64_t fc_counter_rdtscp_only(void)
{
    uint64_t v;
    __asm__ __volatile__("mrs %0, S3_3_C14_C0_6" : "=r"(v) :: "memory");
    fc_counter_order_after(v);
    return v;
}

/* The ordered read of the library's own bookkeeping (calibration samples). */
static inline __attribute__((always_inline)) uint64_t fc_counter_ordered(void)
{
    return fc_counter_lfence();
}

/* No CPU number comes with the count: aux is 0 (the per-CPU mode refuses). */
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
#define FC_COUNTER_HALVES 0
#define FC_COUNTER_CLOCKSOURCE "tsc"
#define FC_COUNTER_NAME "counter"
#define FC_COUNTER_INSN_UNORDERED "none"
#define FC_COUNTER_INSN_ORDERED "none"
#define FC_COUNTER_INSN_ALT "none"
#define FC_DISTRUST_HINT "which happens when the kernel marked it unstable"
#define FC_COUNTER_INVARIANT "the counter is invariant and "
#define FC_COUNTER_ERRATA 0
#define FC_HAVE_PERCPU 0
#define FC_NO_PERCPU_REASON "this architecture has no counter fastclock can read"
static inline uint64_t fc_counter_unordered(void) { return 0; }
static inline uint64_t fc_counter_ordered(void) { return 0; }
static inline uint64_t fc_counter_lfence(void) { return 0; }
static inline uint64_t fc_counter_rdtscp_only(void) { return 0; }
static inline uint64_t fc_counter_rdtscp(uint32_t *aux) { *aux = 0; return 0; }
static inline void fc_cpu_relax(void) {}

#endif

/* The ordered read the global latch's flags ask for (FC_READ_RDTSCP: rdtscp
 * on x86, cntvctss_el0 on arm64), as one value. */
static inline __attribute__((always_inline)) uint64_t fc_counter_fenced(uint32_t flags)
{
#if FC_COUNTER_HALVES
    uint64_t lo, hi;
    fc_counter_fenced_halves(flags, &lo, &hi);
    return (hi << 32) | lo;
#else
    return (flags & FC_READ_RDTSCP) ? fc_counter_rdtscp_only() : fc_counter_lfence();
#endif
}

/* counter.c: the ordered read's instruction (FC_READ_* of line.h), chosen
 * by measuring it against the kernel's clock (whose cost it keeps). */
uint32_t fc_counter_choose(double ns_per_tick);
/* Before that choice (the decision's and the first line's samples):
 * FC_READ_RDTSCP where lfence may not hold rdtsc back and the CPU has
 * rdtscp (the choice then takes it too: fc_counter_prefer_rdtscp), else 0.
 * Set by fc_counter_order_early, called by the decision (one CPUID on
 * Intel, up to four on AMD). */
extern uint32_t fc_counter_early_flags __attribute__((visibility("hidden"))); /* atomic builtins */
void fc_counter_order_early(void);
/* The instruction fc_counter_choose picked last (FC_READ_RDTSCP or 0), or
 * -1 before it has chosen: the warp check reads with it. */
int fc_counter_chosen(void);
/* The ratio that choice went by: rdtscp's cost over lfence;rdtsc's (0
 * without rdtscp, or before a choice). */
double fc_counter_chosen_ratio(void);
/* Its rule for the instruction: lfence;rdtsc without rdtscp; rdtscp where
 * lfence may not order rdtsc (lfence_orders 0); otherwise the one the CPU's
 * vendor makes cheaper (lfence_expected_cheaper: AMD and Hygon), unless the
 * other is clearly cheaper here: rdtscp_over_lfence, a paired median ratio
 * (the nearer the vendor's instruction of two measurements), beyond 1.25
 * for lfence;rdtsc, or below 1/1.25 for rdtscp. */
int fc_counter_prefer_rdtscp(int has_rdtscp, int lfence_orders, int lfence_expected_cheaper,
                             double rdtscp_over_lfence);
/* Of a ratio that would leave the vendor's instruction and its second
 * measurement, the one nearer that instruction: the choice leaves it only
 * if both do. */
double fc_counter_nearer_ratio(int lfence_expected_cheaper, double first, double again);
/* Counter ticks for 16 calls of fn, best of a few batches; and the cost of a
 * whole read that a caller measured with it, kept for fastclock_status. */
uint64_t fc_counter_time_calls(int64_t (*fn)(void));
void fc_counter_note_read_cost(double ns);
/* The counter's step in ticks, measured the first time it is asked (by
 * calibration, off the read path; 1 with an injected counter): what each
 * read of a sample may lag its instant by. */
uint64_t fc_counter_step(void);
/* The kernel's fine read over rdtscp, timed in interleaved rounds (paired
 * medians, as fc_counter_choose): about 1.2-1.6 where the vDSO reads a
 * counter in user space, 5 or more where it makes a system call; the first
 * three rounds' answer where it exceeds clearly_above (0: all rounds).  0
 * where there is no rdtscp to compare with. */
double fc_counter_kernel_over_rdtscp(double clearly_above);
/*
 * Who answers mode tsc's ordered wall reads (REALTIME, TAI, gettimeofday)
 * where the kernel's clocksource is the counter: its vDSO REALTIME, or the
 * line's MONOTONIC plus the offset check (wall.h).  wall.c asks for the
 * timing at each decision (fc_counter_time_wall: 1 where the vDSO's
 * clock_gettime is the candidate, refclock.h; 0: nothing to time, the line
 * answers); fc_counter_choose
 * times both, after the instruction, and sets fc_counter_wall_kernel --
 * before the first line is published, so every reader that can see the line
 * sees it.  1: the kernel answers.
 */
void fc_counter_time_wall(int candidate);
extern int fc_counter_wall_kernel __attribute__((visibility("hidden"))); /* atomic builtins */
/* The rule on measured ratios (the kernel's REALTIME over the model of the
 * line's; 1: the kernel answers): the line only where the kernel's costs
 * 1.04 times the line's or more, measured twice (again: 0 where the first
 * said kernel). */
int fc_counter_wall_rule(double kernel_over_line, double again);
/* That ratio, nearer the kernel's side of the two (0: not timed); and the
 * two timings themselves (again 0: not measured a second time). */
double fc_counter_wall_ratio(void);
void fc_counter_wall_timings(double *first, double *again);
/* The costs measured: the ordered read, the kernel's clock (0: not yet). */
void fc_counter_costs(double *ours, double *kernel);
void fc_counter_reset_for_tests(void);
/* 1 when the CPU has rdtscp (known once fc_counter_choose ran; 0 on arm64). */
int fc_counter_has_rdtscp(void);

#endif
