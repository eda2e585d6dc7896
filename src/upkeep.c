/* Upkeep requests (upkeep.h): a futex word and a few flags. */
#define _GNU_SOURCE
#include "upkeep.h"

#include <limits.h>
#include <stddef.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fastclock_inline.h"

struct fc_coarse fc_coarse;

/* fastclock_inline.h reads this block through fastclock_coarse_v1: keep its
 * mirror true (a change that moves these does not build). */
_Static_assert(offsetof(struct fc_coarse, mono) == offsetof(struct fastclock_coarse_block_v1, mono) &&
                   offsetof(struct fc_coarse, real) == offsetof(struct fastclock_coarse_block_v1, real) &&
                   offsetof(struct fc_coarse, direct) == offsetof(struct fastclock_coarse_block_v1, kernel_gettime),
               "fastclock_inline.h's struct fastclock_coarse_block_v1 no longer mirrors struct fc_coarse");

static _Atomic int running;
static _Atomic int paused;
static _Atomic int coarse_wanted;
static _Atomic int wake_seq; /* futex word: bumped by every wake-up request */

int fc_upkeep_running(void) { return atomic_load_explicit(&running, memory_order_relaxed); }
void fc_upkeep_set_running(int r) { atomic_store_explicit(&running, r, memory_order_relaxed); }

void fc_upkeep_wake(void)
{
    if (!fc_upkeep_running())
        return;
    atomic_fetch_add_explicit(&wake_seq, 1, memory_order_release);
    syscall(SYS_futex, &wake_seq, FUTEX_WAKE_PRIVATE, INT_MAX, 0, 0, 0);
}

int fc_upkeep_wake_count(void) { return atomic_load_explicit(&wake_seq, memory_order_acquire); }

void fc_upkeep_wait(int seen, int64_t timeout_ns)
{
    struct timespec to = {.tv_sec = (time_t)(timeout_ns / 1000000000LL), .tv_nsec = (long)(timeout_ns % 1000000000LL)};
    syscall(SYS_futex, &wake_seq, FUTEX_WAIT_PRIVATE, seen, timeout_ns >= 0 ? &to : 0, 0, 0);
}

void fc_coarse_request(void)
{
    if (!atomic_load_explicit(&coarse_wanted, memory_order_relaxed)) {
        atomic_store_explicit(&coarse_wanted, 1, memory_order_relaxed);
        fc_upkeep_wake();
    }
}

int fc_coarse_wanted(void) { return atomic_load_explicit(&coarse_wanted, memory_order_relaxed); }

void fc_upkeep_pause(int p)
{
    atomic_store_explicit(&paused, p, memory_order_release);
    fc_upkeep_wake();
}

int fc_upkeep_paused(void) { return atomic_load_explicit(&paused, memory_order_acquire); }

void fc_upkeep_reset_for_tests(void)
{
    atomic_store(&coarse_wanted, 0);
    atomic_store(&paused, 0);
    atomic_store_explicit(&fc_coarse.mono, 0, memory_order_relaxed);
    atomic_store_explicit(&fc_coarse.real, 0, memory_order_relaxed);
    atomic_store_explicit(&fc_coarse.floor_mono, 0, memory_order_relaxed);
    atomic_store_explicit(&fc_coarse.direct, (fc_coarse_fn)0, memory_order_relaxed);
}
