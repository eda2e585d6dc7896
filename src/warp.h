/* Cross-CPU counter warp check: a user-space check_tsc_warp.
 *
 * Two threads pinned to two CPUs take strict turns: read the counter
 * (ordered), compare with the value the other stored, store theirs, hand
 * the turn over.  A value below the last one is a warp: the counters of those
 * CPUs disagree by at least that much (or the counter went backwards).
 * Creates threads: call it from a normal context (CLI, calibrator thread),
 * never from the read path. */
#ifndef FC_WARP_H
#define FC_WARP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct fc_warp_result {
    int cpus;                 /* CPUs this process may run on */
    int pairs_tested;
    int pairs_skipped;        /* could not pin (offline, cpuset), or never took turns */
    int pairs_unpinned;       /* of those, the ones whose threads could not be pinned */
    int stuck;                /* a worker never got its CPU (a real-time task there): left behind */
    uint64_t iterations;      /* reads taken in turn, all pairs */
    int64_t max_warp_cycles;  /* largest backward step seen, 0 if none */
    int worst_cpu_a, worst_cpu_b;
    uint64_t warps;           /* backward steps seen, all pairs */
    int64_t elapsed_ns;
    int rdtscp;               /* the reads were FC_COUNTER_INSN_ALT (rdtscp), else FC_COUNTER_INSN_ORDERED */
};

/* Tests up to max_pairs CPU pairs (all pairs when there are few, otherwise
 * CPU 0 against a spread of others), spending about ns_per_pair on each.
 * Returns 0, or -1 when fewer than two CPUs can be used. */
int fc_warp_check(int64_t ns_per_pair, int max_pairs, struct fc_warp_result *out);

/* The same, calling tick (if not NULL) every 200 us or so while the
 * calling thread waits on the pair's workers: the calibrator's coarse
 * clocks keep ticking through the check. */
int fc_warp_check_ticking(int64_t ns_per_pair, int max_pairs, void (*tick)(void), struct fc_warp_result *out);

/* What a check's result lets its caller conclude: FC_WARP_FOUND, a warp
 * between two CPUs (however few pairs were compared); FC_WARP_IN_STEP, no
 * warp, and every pair the check set out to test was compared;
 * FC_WARP_NO_VERDICT otherwise -- no pair compared, or no warp among those
 * compared while others were skipped or never reached (the skipped pair
 * may be the one across sockets): the caller tries again. */
enum { FC_WARP_NO_VERDICT = -1, FC_WARP_IN_STEP = 0, FC_WARP_FOUND = 1 };
/* A warp counts only beyond tolerance_cycles (fc_warp_sub_ns_cycles: under
 * a nanosecond, the clocks' unit; 0: any). */
int fc_warp_verdict(const struct fc_warp_result *w, int64_t tolerance_cycles);
/* The counter cycles in a nanosecond, at least 1: a disagreement that small
 * is KVM's per-vCPU counter offsets (1 cycle seen on an AMD EPYC 1Ah guest,
 * whose fenced reads step by 26 cycles, in 1 of ~20 fresh processes: each
 * then took tsc-percpu), below what a nanosecond clock resolves.  It can
 * still make a read that follows another CPU's 1 ns lower, as it can the
 * kernel's own clock on the same counter. */
int64_t fc_warp_sub_ns_cycles(double ns_per_tick);
/* The counter's ns per tick between two samples of it and of the kernel's
 * clock (t, ns), for that tolerance where no line has measured the rate yet;
 * 0 where the samples say nothing (no time between them, or a rate outside
 * 1 MHz - 100 GHz). */
double fc_warp_rate_between(uint64_t t0, int64_t ns0, uint64_t t1, int64_t ns1);

/* Where not every pair is tested: the index (into the allowed CPUs, 0..n-1)
 * of the first CPU's partner in pair k of pairs, spread evenly from the
 * second CPU to the last (sockets and dies are usually contiguous ranges,
 * and the last CPU is the likeliest to sit on another). */
int fc_warp_partner(int k, int n, int pairs);

/* The process's own verdict, from whichever checks ran (the calibrator
 * thread's at start-up, the lazy calibrator's samples): the largest warp
 * noted, in cycles, -1 while none has run (a note below it changes
 * nothing).  Reported by fastclock_status. */
void fc_warp_note(int64_t max_warp_cycles);
int64_t fc_warp_noted(void);
void fc_warp_reset_for_tests(void);

#ifdef __cplusplus
}
#endif
#endif
