/*
 * fastclock_inline.h: the coarse clocks as an inline load, for C and C++
 * callers for whom even a function call is too much (~1.4 ns here; the
 * inline read is two loads from memory).
 *
 * Same values and guarantees as fastclock_mono_coarse_ns() and
 * fastclock_real_coarse_ns() (fastclock.h): while a calibrator thread ticks
 * them (every ~1 ms) they come from memory it publishes; otherwise the
 * function is called, which reads the kernel's coarse clocks.
 *
 * ABI: the library exports fastclock_coarse_v1, a constant pointer to a block
 * whose first two 64-bit words are the published MONOTONIC and REALTIME
 * values (MONOTONIC 0: nobody ticks).  A later layout gets a new name; this
 * one stays as long as the library's major version does.
 */
#ifndef FASTCLOCK_INLINE_H
#define FASTCLOCK_INLINE_H

#include "fastclock.h"

#ifdef __cplusplus
extern "C" {
#endif

struct fastclock_coarse_block_v1 {
    int64_t mono; /* CLOCK_MONOTONIC ns, 0 while nobody ticks */
    int64_t real; /* CLOCK_REALTIME ns, valid while mono != 0 */
};
extern const struct fastclock_coarse_block_v1 *const fastclock_coarse_v1;

static inline int64_t fastclock_mono_coarse_ns_inline(void)
{
    int64_t v = __atomic_load_n(&fastclock_coarse_v1->mono, __ATOMIC_ACQUIRE);
    return __builtin_expect(v != 0, 1) ? v : fastclock_mono_coarse_ns();
}

static inline int64_t fastclock_real_coarse_ns_inline(void)
{
    const struct fastclock_coarse_block_v1 *b = fastclock_coarse_v1;
    if (__builtin_expect(__atomic_load_n(&b->mono, __ATOMIC_ACQUIRE) != 0, 1))
        return __atomic_load_n(&b->real, __ATOMIC_RELAXED);
    return fastclock_real_coarse_ns();
}

#ifdef __cplusplus
}
#endif

#endif /* FASTCLOCK_INLINE_H */
