/* The test seam's description (plain C, includable from C++ tests). */
#ifndef FC_SEAM_H
#define FC_SEAM_H

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

struct fc_cpu_info;
struct timex;

/* Tests replace the counter and the kernel clock with simulated ones.  When
 * a counter is injected every line is published with fast_span 0, so all
 * reads take the slow path, which reads the injected counter and evaluates
 * the same line with the same code. */
struct fc_seam {
    uint64_t (*counter)(void);                           /* NULL: hardware (ordered read) */
    uint64_t (*counter_aux)(uint32_t *aux);              /* NULL: rdtscp; aux = (node << 12) | cpu */
    int (*kernel_gettime)(clockid_t, struct timespec *); /* NULL: vDSO/syscall */
    int (*adjtimex)(struct timex *);                     /* NULL: the kernel's */
    const struct fc_cpu_info *cpu;                       /* NULL: CPUID */
    const char *sysroot;                                 /* NULL: the live /sys */
    int skip_warp_check;
    int64_t warp_cycles;                                 /* >0: the start-up warp check finds this warp */
    int ncpus;                                           /* 0: from sysfs */
    int ordered_route; /* the counter-cost routes (counter.h): 0 as counter.c measures them (the
                          counter, unless the kernel's clock costs under half of it); 1 ordered
                          reads to the kernel's clock, unordered ones to the counter; 2 every
                          fine read to the kernel's clock; -1 every read to the counter */
    int percpu_route;  /* tsc-percpu's fine reads: 0 as the machine says (the kernel's clock where its
                          clocksource is the counter; the lines if anything above is simulated),
                          1 the kernel's clock, -1 the per-CPU lines */
    int percpu_wall_route; /* tsc-percpu's wall clocks where its fine reads are the lines': 0 as
                              measured (the per-CPU lines if anything above is simulated), 1 the
                              kernel's clock, -1 the per-CPU lines plus the offset */
    int wall_route;        /* mode tsc's ordered wall clocks where the kernel's clocksource is the
                              counter (counter.c wall_choose, fc_counter_wall_kernel): 0 as measured (the
                              kernel's clock if the counter is simulated), 1 the kernel's clock,
                              -1 the line plus the offset check */
    void (*warp_worker_start)(int cpu); /* non-NULL: called first by each warp-check worker
                                           (a test holds one there: a CPU it never gets) */
    void (*warp_worker_ready)(int cpu); /* non-NULL: called by each warp-check worker once both
                                           have started, before they take turns (a worker preempted
                                           for the whole window) */
    uint64_t (*warp_counter)(int cpu, uint64_t t); /* non-NULL: what the warp-check worker pinned
                                                      to cpu reads, given the counter it read
                                                      (a test puts a CPU's counter apart) */
    void (*writer_step)(const char *where); /* non-NULL: called by the global line's writer at
                                               named points of a publication (a test preempts it
                                               there): "build" (sampled, nothing built yet),
                                               "cutting" (the guard found ahead, the old
                                               line's cut not yet published),
                                               "fenced" (leaving the line: its fence cut
                                               published and looked at once),
                                               "fence-looked" (its uncut end brought
                                               down and looked at again),
                                               "cut" (each try that guards the old line),
                                               "publishing" (fallbacks now held at the old
                                               line's end), "seen", "published"; and by an adjtimex poll
                                               at "poll-stored" (a change found and stored,
                                               not yet counted in the generation) */
    void (*tour_cpu)(int cpu); /* non-NULL: called by the calibrator's tour of tsc-percpu's CPUs
                                  once on each CPU, before calibrating it (a test holds it
                                  there: a CPU slow to take it) */
};

/* The one instance (seam.c), installed only by fc_test_reset (testing.c). */
extern struct fc_seam fc_seam __attribute__((visibility("hidden")));

#ifdef __cplusplus
}
#endif
#endif
