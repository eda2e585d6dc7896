#define _GNU_SOURCE
#include "warp.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "internal.h"

struct pair_state {
    _Atomic int lock __attribute__((aligned(64)));
    uint64_t last;
    uint64_t warps;
    int64_t max_warp;
    uint64_t iterations;
    _Atomic int ready;
    _Atomic int stop;
    int pin_failed;
};

struct worker {
    struct pair_state *st;
    int cpu;
};

/* Through the vDSO's own symbol: never the (possibly interposed) clock_gettime. */
static int64_t mono_ns(void)
{
    return fc_kernel_ns(CLOCK_MONOTONIC);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
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
    while (!atomic_load_explicit(&st->stop, memory_order_relaxed)) {
        int expected = 0;
        if (!atomic_compare_exchange_weak_explicit(&st->lock, &expected, 1, memory_order_acquire,
                                                   memory_order_relaxed)) {
            fc_cpu_relax();
            continue;
        }
        uint64_t prev = st->last;
        uint64_t now = fc_counter_ordered();
        if (now < prev) {
            st->warps++;
            if ((int64_t)(prev - now) > st->max_warp)
                st->max_warp = (int64_t)(prev - now);
        }
        st->last = now;
        st->iterations++;
        atomic_store_explicit(&st->lock, 0, memory_order_release);
    }
    return 0;
}

static int run_pair(int a, int b, int64_t ns, struct fc_warp_result *out)
{
    struct pair_state st;
    memset(&st, 0, sizeof st);
    struct worker wa = {&st, a}, wb = {&st, b};
    pthread_t ta, tb;
    if (pthread_create(&ta, 0, worker_main, &wa) != 0)
        return -1;
    if (pthread_create(&tb, 0, worker_main, &wb) != 0) {
        atomic_store(&st.ready, 2);
        atomic_store(&st.stop, 1);
        pthread_join(ta, 0);
        return -1;
    }
    int64_t until = mono_ns() + ns;
    struct timespec nap = {0, 200000};
    while (mono_ns() < until)
        nanosleep(&nap, 0);
    atomic_store(&st.stop, 1);
    pthread_join(ta, 0);
    pthread_join(tb, 0);
    if (st.pin_failed)
        return -1;
    out->iterations += st.iterations;
    out->warps += st.warps;
    if (st.max_warp > out->max_warp_cycles) {
        out->max_warp_cycles = st.max_warp;
        out->worst_cpu_a = a;
        out->worst_cpu_b = b;
    }
    return 0;
}

int fc_warp_check(int64_t ns_per_pair, int max_pairs, struct fc_warp_result *out)
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
    int total_pairs = n * (n - 1) / 2;
    if (total_pairs <= max_pairs) {
        for (int i = 0; i < n; i++)
            for (int j = i + 1; j < n; j++) {
                if (run_pair(cpus[i], cpus[j], ns_per_pair, out) == 0)
                    out->pairs_tested++;
                else
                    out->pairs_skipped++;
            }
    } else {
        /* Big machine: the first CPU against an even spread of the others
         * (sockets and dies are usually contiguous ranges). */
        for (int k = 0; k < max_pairs; k++) {
            int j = 1 + (int)((int64_t)k * (n - 1) / max_pairs);
            if (run_pair(cpus[0], cpus[j], ns_per_pair, out) == 0)
                out->pairs_tested++;
            else
                out->pairs_skipped++;
        }
    }
    out->elapsed_ns = mono_ns() - start;
    return out->pairs_tested > 0 ? 0 : -1;
}

static _Atomic int64_t noted_plus1; /* 0: no check has run */

void fc_warp_note(int64_t max_warp_cycles)
{
    atomic_store_explicit(&noted_plus1, max_warp_cycles + 1, memory_order_relaxed);
}

int64_t fc_warp_noted(void)
{
    return atomic_load_explicit(&noted_plus1, memory_order_relaxed) - 1;
}

void fc_warp_reset_for_tests(void)
{
    atomic_store(&noted_plus1, 0);
}
