/*
 * The bottom of the house: compiler helpers, nanosecond arithmetic and the
 * clock kinds, shared by every file and depending on none of them.
 */
#ifndef FC_BASE_H
#define FC_BASE_H

#include <stdint.h>
#include <time.h>

#define FC_INLINE static inline __attribute__((always_inline))
#define FC_LIKELY(x) __builtin_expect(!!(x), 1)
#define FC_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define FC_LOAD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define FC_HIDDEN __attribute__((visibility("hidden")))
#define FC_NS_PER_SEC 1000000000LL
/* A large zeroed object that loading, the constructor and the fine reads
 * before the mode is decided never touch (the decision itself may: a first
 * coarse read or fastclock_status decides at once), kept apart from the
 * small state those do touch: in .lbss, which the x86-64 linker places
 * after .bss.  Among them (64 KB here, 8 KB there) the small state spread
 * over three pages, two faults each (a read, then the write), ~1-2 us a
 * fault in a VM; apart, it shares the page the loader has already written
 * (.got.plt, .data).  The static library's one object puts them back at the
 * end of its .bss (cmake/static-bss.ld): no medium-model section reaches a
 * program that links it. */
#if defined(__x86_64__)
#define FC_LARGE_BSS __attribute__((section(".lbss")))
#else
#define FC_LARGE_BSS
#endif

/* v within [lo, hi]. */
FC_INLINE int64_t fc_clamp_i64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The timelines fastclock serves: MONOTONIC and its offsets. */
enum fc_kind { FC_MONO, FC_REAL, FC_BOOT, FC_TAI };

/* The kernel's clock behind each kind. */
FC_INLINE clockid_t fc_kind_clock(enum fc_kind kind)
{
    switch (kind) {
    case FC_REAL: return CLOCK_REALTIME;
    case FC_BOOT: return CLOCK_BOOTTIME;
    case FC_TAI: return CLOCK_TAI;
    default: return CLOCK_MONOTONIC;
    }
}

FC_INLINE int64_t fc_ts_to_ns(const struct timespec *ts)
{
    return (int64_t)ts->tv_sec * FC_NS_PER_SEC + ts->tv_nsec;
}

FC_INLINE void fc_ns_to_ts(int64_t ns, struct timespec *ts)
{
    int64_t sec = ns / FC_NS_PER_SEC, rem = ns % FC_NS_PER_SEC;
    if (rem < 0) { rem += FC_NS_PER_SEC; sec -= 1; }
    ts->tv_sec = (time_t)sec;
    ts->tv_nsec = (long)rem;
}

#endif
