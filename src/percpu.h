/* tsc-percpu mode: one calibrated line per CPU, selected by rdtscp's TSC_AUX. */
#ifndef FC_PERCPU_H
#define FC_PERCPU_H

#include <stddef.h>
#include <stdint.h>

#include "calibration.h"
#include "internal.h"
#include "line.h"

/* One CPU's line and its calibration state.  percpu.c is the only writer
 * of the slots, the floor and the slot count; the inline read below reads
 * a slot through its thread's guess, and the floor (it writes only its own
 * thread's clamp and nothing shared). */
enum { FC_SLOT_EMPTY = 0, FC_SLOT_OK = 1, FC_SLOT_GIVEN_UP = 2 };

struct fc_cpu_slot {
    struct fc_latch latch;
    _Atomic int state;
    int cpu;                       /* this slot's CPU (-1 with the test seam's counter: no fast read),
                                      written before the slots are published */
    struct fc_cal_state cs;
    _Atomic int lock;
    _Atomic int64_t retry_after;   /* kernel MONOTONIC, while given up */
    /* The next three: written and read under the slot's lock only (next_start
     * is also peeked at, atomically, by fc_percpu_interval_ns and by a read
     * that finds no line, to leave the lock alone until it is due). */
    int64_t failing_since;         /* first failed start, kernel MONOTONIC */
    int64_t next_start;            /* no start before this (kernel MONOTONIC): a failed one backs off */
    int64_t start_backoff;         /* the wait after the last failed start, ns (0: none failed) */
} __attribute__((aligned(64)));

extern _Atomic(struct fc_cpu_slot *) fc_percpu_slots; /* one per possible CPU, from setup on */
extern _Atomic int fc_percpu_nslots;
/* The global line's ceiling when mode tsc-percpu began (0 when it began at
 * the decision): written before the mode, read by every per-CPU read. */
extern _Atomic int64_t fc_percpu_switch_floor;
/* Per-thread clamp: the largest MONOTONIC value this thread was given. */
extern __thread int64_t fc_percpu_tls_last __attribute__((tls_model("initial-exec")));
/* Per-thread guess: the slot of the CPU this thread's last per-CPU read ran
 * on (a thread is rarely moved).  Only a guess: rdtscp checks it on every
 * read, and the slow read corrects it; a signal handler's write is as good
 * as ours (one word: the slot names its CPU).  A pointer, not an index, so
 * that the read's first load is the slot's: an index into the slots costs a
 * load and a multiply more ahead of rdtscp, which waits for them (~1.5 ns
 * measured on an Intel guest).  Never freed: slots live from setup on. */
extern __thread struct fc_cpu_slot *fc_percpu_tls_slot __attribute__((tls_model("initial-exec")));

/* max(v, fc_percpu_tls_last), stored back.  On x86 a cmpxchg without lock is
 * atomic against a signal handler on this same thread, and costs no bus lock
 * (nothing measurable against a plain store here). */
FC_INLINE int64_t fc_percpu_tls_clamp(int64_t v)
{
#if defined(__x86_64__)
    int64_t old = fc_percpu_tls_last;
    while (v > old) {
        int64_t seen = old;
        __asm__ __volatile__("cmpxchgq %2, %1" : "+a"(seen), "+m"(fc_percpu_tls_last) : "r"(v) : "cc", "memory");
        if (seen == old)
            return v;
        old = seen;
    }
    return old;
#else
    int64_t old = __atomic_load_n(&fc_percpu_tls_last, __ATOMIC_RELAXED);
    while (v > old &&
           !__atomic_compare_exchange_n(&fc_percpu_tls_last, &old, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return v > old ? v : old;
#endif
}

/* Never below what the global line gave before the switch, nor below what
 * this thread saw on another CPU. */
FC_INLINE int64_t fc_percpu_clamp(int64_t mono)
{
    int64_t floor = atomic_load_explicit(&fc_percpu_switch_floor, memory_order_relaxed);
    if (FC_UNLIKELY(mono < floor))
        mono = floor;
    return fc_percpu_tls_clamp(mono);
}

/* The read, inline where it is hot (clock.c): the line of the CPU this
 * thread last ran on, loaded before rdtscp, which confirms the CPU.  0 when
 * that line cannot answer now (the thread moved, no line, or it ran out):
 * then fc_percpu_read_slow (which corrects the guess, calibrates here, or
 * asks the kernel). */
/* BOOTTIME's offset for a per-CPU line: the one kept for every line
 * (calibration.c) where it is higher.  A suspend raises it at the first CPU
 * that samples after the resume; a CPU whose line predates the suspend (a
 * counter that stood still leaves that line right for MONOTONIC) carries
 * the old one until its own renewal, and a thread that moved from the first
 * CPU to it would see BOOTTIME go back by the suspend.  BOOTTIME only. */
FC_INLINE int64_t fc_percpu_boot_offset(int64_t line_offset)
{
    int64_t kept = fc_cal_boot_offset(line_offset);
    return kept > line_offset ? kept : line_offset;
}

FC_INLINE int fc_percpu_read_fast(enum fc_kind kind, int64_t *out)
{
    struct fc_cpu_slot *sl = fc_percpu_tls_slot;
    uint32_t aux;
    int64_t mono, offset;
    /* With the test seam's counter no slot names a CPU (percpu.c): its
     * reads are the slow read's. */
    if (FC_LIKELY(sl != 0) &&
        FC_LIKELY(atomic_load_explicit(&sl->state, memory_order_acquire) == FC_SLOT_OK) &&
        FC_LIKELY(fc_line_read_counted(&sl->latch, kind, fc_counter_rdtscp, &aux, &mono, &offset)) &&
        FC_LIKELY(FC_AUX_CPU(aux) == sl->cpu)) {
        if (kind == FC_BOOT)
            offset = fc_percpu_boot_offset(offset);
        *out = fc_percpu_clamp(mono) + offset;
        return 1;
    }
    return 0;
}

/* Allocates the per-CPU lines, checks that TSC_AUX names the CPU and
 * measures the rate every CPU's first line starts from, between two
 * adjtimex polls that found the same settings (so the sync state that
 * status and bounds read is fresh).  Lines set up before: 0 at once.
 * Async-signal-safe (mmap; the CPU from lsl, or sched_getcpu: a load from
 * rseq or a vDSO call, no lock).  0, or -1 with the reason in why. */
int fc_percpu_setup(char *why, size_t why_size);
/* The read path of mode tsc-percpu: the inline read, else the slow one. */
int64_t fc_percpu_read(enum fc_kind kind);
int64_t fc_percpu_read_slow(enum fc_kind kind);
/* Calibrator thread, pinned to `cpu`: start or refresh that CPU's line. */
void fc_percpu_maintain_cpu(int cpu, int force);
/* Before mode tsc-percpu begins: no per-CPU read returns less (the global
 * line's ceiling). */
void fc_percpu_set_floor(int64_t floor_ns);
/* ns per tick measured on one CPU at setup (0 before). */
double fc_percpu_seed_rate(void);
/* Shortest interval any calibrated CPU wants now; with none calibrated,
 * the time from now until the first CPU is due for a start or a retry
 * (1 ms-1 s; 1 ms while none has been tried). */
int64_t fc_percpu_interval_ns(void);
/* With no CPU calibrated: when (kernel MONOTONIC) the first CPU is due for
 * a start or a retry -- the calibrator's next tour, not one each
 * millisecond: with every CPU given up (a retry 15 s away) a tour each
 * millisecond would move its thread across every CPU for nothing, and
 * where a tour takes longer than that, never sleep.  A CPU due before
 * last_tour began (when the last tour started) is one the tour cannot
 * visit (it came online since, or lies outside the calibrator's CPUs): its
 * readers start it, and it does not count.  0: a CPU has its line
 * (fc_percpu_interval_ns), or none is due. */
int64_t fc_percpu_idle_until(int64_t last_tour);
void fc_percpu_after_fork_child(void);
/* A fork child in a new time namespace (the only thread): the switch floor
 * and this thread's clamp are another timeline's MONOTONIC values. */
void fc_percpu_forget_floors(void);

struct fc_percpu_stats {
    int cpus;              /* slots */
    int calibrated;        /* CPUs with a usable line */
    int given_up;          /* CPUs read through the kernel after 15 s of failed calibration */
    int64_t bound_ns;      /* the mode's error bound now: the two largest CPU bounds
                              added (two CPUs' lines may disagree by that much) */
    int64_t max_age_ns;    /* the stalest calibrated CPU's time since its calibration */
    double mean_hz;        /* average counter frequency */
    int64_t max_warp_cycles; /* start-up warp check, -1 if it did not run */
};
void fc_percpu_stats(struct fc_percpu_stats *out);
void fc_percpu_reset_for_tests(void);

#endif
