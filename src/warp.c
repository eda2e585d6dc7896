#define _GNU_SOURCE
#include "warp.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu.h"
#include "internal.h"
#include "seam.h"

struct pair_state {
    _Atomic int turn __attribute__((aligned(64))); /* which worker reads next: 0 or 1 */
    uint64_t last;
    uint64_t warps;
    int64_t max_warp;
    uint64_t iterations; /* reads; every one after the first follows the other CPU's */
    _Atomic int ready;
    _Atomic int stop;
    int pin_failed;
    uint32_t fenced; /* the ordered read: the process's choice (FC_READ_RDTSCP or 0) */
};

struct worker {
    struct pair_state *st;
    int cpu;
    int index; /* 0 or 1: its turn */
};

/* One pair's memory, on the heap: a worker that never gets its CPU (a
 * real-time task busy there, with RT throttling off) outlives run_pair,
 * which stops waiting for it; whoever leaves last frees it. */
struct pair_block {
    struct pair_state st;
    struct worker w[2];
    _Atomic int refs; /* run_pair and each worker */
    _Atomic int done; /* workers that have left */
};

static void block_release(struct pair_block *b)
{
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        free(b);
}

/* Through the vDSO's own symbol: never the (possibly interposed) clock_gettime. */
static int64_t mono_ns(void)
{
    return fc_kernel_ns(CLOCK_MONOTONIC);
}

static void worker_loop(struct worker *w)
{
    struct pair_state *st = w->st;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w->cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
        st->pin_failed = 1;
    /* Start together, so the two CPUs really alternate. */
    atomic_fetch_add(&st->ready, 1);
    /* Not past the pair's deadline: a partner that never gets its CPU (a
     * real-time task busy there) must not keep this one spinning. */
    while (atomic_load(&st->ready) < 2 && !atomic_load_explicit(&st->stop, memory_order_relaxed))
        fc_cpu_relax();
    void (*ready_hook)(int) = fc_seam.warp_worker_ready;
    if (ready_hook)
        ready_hook(w->cpu);
    /* Strict turns, not a spinlock: a lock that the releasing CPU takes
     * straight back (AMD Zen 5 under KVM: a dozen hand-overs in 170,000
     * acquisitions) compares next to nothing across CPUs.  Taking turns,
     * every read follows the other CPU's last one: the acquire load of the
     * turn orders it after that read and its store, and the fenced counter
     * read comes after the load, which is the order fastclock's ordered
     * reads promise to keep. */
    int other = w->index ^ 1;
    uint64_t (*counter_hook)(int, uint64_t) = fc_seam.warp_counter;
    while (!atomic_load_explicit(&st->stop, memory_order_relaxed)) {
        if (atomic_load_explicit(&st->turn, memory_order_acquire) != w->index) {
            fc_cpu_relax();
            continue;
        }
        uint64_t prev = st->last;
        uint64_t now = fc_counter_fenced(st->fenced);
        if (counter_hook)
            now = counter_hook(w->cpu, now);
        if (st->iterations > 0 && now < prev) {
            st->warps++;
            if ((int64_t)(prev - now) > st->max_warp)
                st->max_warp = (int64_t)(prev - now);
        }
        st->last = now;
        st->iterations++;
        atomic_store_explicit(&st->turn, other, memory_order_release);
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct pair_block *b = (struct pair_block *)((char *)w->st - offsetof(struct pair_block, st));
    void (*hook)(int) = fc_seam.warp_worker_start;
    if (hook)
        hook(w->cpu);
    worker_loop(w);
    atomic_fetch_add_explicit(&b->done, 1, memory_order_release);
    block_release(b);
    return 0;
}

#define WARP_GRACE_NS 50000000LL /* after the deadline, how long a worker may take to leave */
#define MIN_CROSSINGS 16         /* reads compared with the other CPU's for a pair to count as tested */

/* The check's waits, which the caller's thread would otherwise spend doing
 * nothing: tick (the calibrator's coarse clocks, which stand still while it
 * waits here: up to ~100 ms a pair on a busy machine) runs at each nap. */
static void nap_ticking(const struct timespec *nap, void (*tick)(void))
{
    nanosleep(nap, 0);
    if (tick)
        tick();
}

/* 0: measured; -1: skipped (a thread or a pin failed, or the two never
 * took turns); -2: a worker did not
 * leave within the grace period after the deadline (it never got its CPU):
 * it is left behind, detached, and the check goes no further. */
static int run_pair(int a, int b, int64_t ns, uint32_t fenced, void (*tick)(void), struct fc_warp_result *out)
{
    struct pair_block *blk = calloc(1, sizeof *blk);
    if (!blk)
        return -1;
    struct pair_state *st = &blk->st;
    st->fenced = fenced;
    blk->w[0] = (struct worker){st, a, 0};
    blk->w[1] = (struct worker){st, b, 1};
    atomic_store(&blk->refs, 3);
    pthread_t t[2];
    int started = 0;
    for (; started < 2; started++)
        if (pthread_create(&t[started], 0, worker_main, &blk->w[started]) != 0)
            break;
    if (started < 2)
        atomic_fetch_sub(&blk->refs, 2 - started); /* workers that never started */
    /* The pair's window opens once both workers run (a new thread may wait
     * its turn for a while on a busy machine), within the grace period.
     * mono_ns() is 0 where the kernel's clock cannot be read (no vDSO, a
     * seccomp filter): each wait then ends at once, never hangs. */
    struct timespec nap = {0, 200000};
    int64_t now_ns, start_by = mono_ns() + WARP_GRACE_NS;
    while (started == 2 && atomic_load(&st->ready) < 2 && (now_ns = mono_ns()) != 0 && now_ns < start_by)
        nap_ticking(&nap, tick);
    int64_t until = mono_ns() + (started == 2 && atomic_load(&st->ready) == 2 ? ns : 0);
    while ((now_ns = mono_ns()) != 0 && now_ns < until)
        nap_ticking(&nap, tick);
    atomic_store(&st->stop, 1);
    /* The waiting side has a deadline too: a join would wait for ever. */
    int64_t give_up = mono_ns() + WARP_GRACE_NS;
    while (atomic_load_explicit(&blk->done, memory_order_acquire) < started && (now_ns = mono_ns()) != 0 && now_ns < give_up)
        nap_ticking(&nap, tick);
    /* Left behind: by the count, not the join (a worker that has counted
     * itself out may not have exited yet: it is detached all the same). */
    int left_behind = atomic_load_explicit(&blk->done, memory_order_acquire) < started;
    for (int i = 0; i < started; i++)
        if (pthread_tryjoin_np(t[i], 0) != 0)
            pthread_detach(t[i]);
    /* A pair whose CPUs never took turns (one worker preempted for the
     * whole window, or late to start) compared nothing: skipped, not
     * passed. */
    int r = left_behind ? -2 : (started < 2 || st->pin_failed || st->iterations <= MIN_CROSSINGS) ? -1 : 0;
    if (!left_behind && st->pin_failed) /* a worker left behind may still be writing it */
        out->pairs_unpinned++;
    if (r == 0) {
        out->iterations += st->iterations;
        out->warps += st->warps;
        if (st->max_warp > out->max_warp_cycles) {
            out->max_warp_cycles = st->max_warp;
            out->worst_cpu_a = a;
            out->worst_cpu_b = b;
        }
    }
    block_release(blk);
    return r;
}

int fc_warp_check(int64_t ns_per_pair, int max_pairs, struct fc_warp_result *out)
{
    return fc_warp_check_ticking(ns_per_pair, max_pairs, 0, out);
}

int fc_warp_check_ticking(int64_t ns_per_pair, int max_pairs, void (*tick)(void), struct fc_warp_result *out)
{
    memset(out, 0, sizeof *out);
    out->worst_cpu_a = out->worst_cpu_b = -1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return -1;
    int cpus[CPU_SETSIZE], n = 0;
    for (int i = 0; i < CPU_SETSIZE; i++)
        if (CPU_ISSET(i, &set))
            cpus[n++] = i;
    out->cpus = n;
    if (n < 2 || max_pairs < 1)
        return -1;
    int64_t start = mono_ns();
    /* The process's ordered read, so that a check without a warp proves it
     * (counter.c chose lfence;rdtsc only where lfence orders it); before
     * that choice rdtscp where the CPU has it, as the kernel's
     * rdtsc_ordered(): lfence holds rdtsc back only on some AMD families
     * (cpu.h), and a read let out early would be a false warp. */
    int chosen = fc_counter_chosen();
    uint32_t fenced = chosen >= 0 ? (uint32_t)chosen : fc_cpu_has_rdtscp() ? FC_READ_RDTSCP : 0;
    out->rdtscp = (fenced & FC_READ_RDTSCP) != 0;
    int total_pairs = n * (n - 1) / 2;
    /* All pairs on a small machine; on a big one the first CPU against an
     * even spread of the others (sockets and dies are usually contiguous
     * ranges).  A pair whose worker is stuck ends the check: the next
     * pairs would likely wait on that CPU too. */
    int all = total_pairs <= max_pairs, pairs = all ? total_pairs : max_pairs < n - 1 ? max_pairs : n - 1;
    for (int k = 0, i = 0, j = 1; k < pairs; k++) {
        int x = all ? cpus[i] : cpus[0];
        int y = all ? cpus[j] : cpus[fc_warp_partner(k, n, pairs)];
        int r = run_pair(x, y, ns_per_pair, fenced, tick, out);
        if (r == 0)
            out->pairs_tested++;
        else
            out->pairs_skipped++;
        if (r == -2) {
            out->stuck = 1;
            break;
        }
        if (all && ++j == n) {
            i++;
            j = i + 1;
        }
    }
    out->elapsed_ns = mono_ns() - start;
    return out->pairs_tested > 0 ? 0 : -1;
}

int fc_warp_partner(int k, int n, int pairs)
{
    if (pairs <= 1)
        return n - 1;
    return 1 + (int)((int64_t)k * (n - 2) / (pairs - 1));
}

int fc_warp_verdict(const struct fc_warp_result *w, int64_t tolerance_cycles)
{
    if (w->pairs_tested > 0 && w->max_warp_cycles > tolerance_cycles)
        return FC_WARP_FOUND;
    if (w->pairs_tested > 0 && w->pairs_skipped == 0 && !w->stuck)
        return FC_WARP_IN_STEP;
    return FC_WARP_NO_VERDICT;
}

int64_t fc_warp_sub_ns_cycles(double ns_per_tick)
{
    int64_t c = ns_per_tick > 0 ? (int64_t)(1.0 / ns_per_tick) : 1;
    return c < 1 ? 1 : c;
}

double fc_warp_rate_between(uint64_t t0, int64_t ns0, uint64_t t1, int64_t ns1)
{
    if (t1 <= t0 || ns1 <= ns0)
        return 0;
    double rate = (double)(ns1 - ns0) / (double)(t1 - t0);
    return rate >= 0.01 && rate <= 1000.0 ? rate : 0;
}

static _Atomic int64_t noted_plus1; /* 0: no check has run */

/* Both checks note here (the thread's and, until it starts, the lazy one's,
 * which may overlap): the larger verdict stands, whichever notes last. */
void fc_warp_note(int64_t max_warp_cycles)
{
    int64_t seen = atomic_load_explicit(&noted_plus1, memory_order_relaxed);
    while (max_warp_cycles + 1 > seen &&
           !atomic_compare_exchange_weak_explicit(&noted_plus1, &seen, max_warp_cycles + 1, memory_order_relaxed,
                                                  memory_order_relaxed)) {
    }
}

int64_t fc_warp_noted(void)
{
    return atomic_load_explicit(&noted_plus1, memory_order_relaxed) - 1;
}

void fc_warp_reset_for_tests(void)
{
    atomic_store(&noted_plus1, 0);
}
