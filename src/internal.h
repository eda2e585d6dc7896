/*
 * Internal state shared by the library's files.  Not installed.  The line
 * itself (layout, publication, reading) is in line.h.
 */
#ifndef FC_INTERNAL_H
#define FC_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "fastclock.h"
#include "base.h"
#include "counter.h"
#include "line.h"

enum fc_mode {
    FC_MODE_UNINIT = 0,
    FC_MODE_INITIALIZING,
    FC_MODE_TSC,
    FC_MODE_SYSTEM,
    FC_MODE_PERCPU,
};

#include "refclock.h"

/* ---- test seam (seam.h, testing.c) ---- */
#include "seam.h"

FC_INLINE uint64_t fc_now_counter(int ordered)
{
    if (FC_UNLIKELY(fc_seam.counter != 0))
        return fc_seam.counter();
    /* Ordered: the instruction the read paths use (counter.c's choice, made
     * with the first line: rdtscp where lfence may not hold rdtsc back, AMD
     * families without LfenceAlwaysSerializing -- cpu.h), or before that
     * choice the decision's (fc_counter_early_flags, the same rule).  The
     * slow path's reads and the calibration brackets are ordered as the
     * fast reads are. */
    return ordered ? fc_counter_fenced(FC_LOAD(&fc_latch.read_flags) | FC_LOAD(&fc_counter_early_flags))
                   : fc_counter_unordered();
}

/* rdtscp: the counter and TSC_AUX, read atomically on one CPU. */
FC_INLINE uint64_t fc_now_counter_aux(uint32_t *aux)
{
    if (FC_UNLIKELY(fc_seam.counter_aux != 0))
        return fc_seam.counter_aux(aux);
    return fc_counter_rdtscp(aux);
}
#define FC_AUX_CPU(aux) ((int)((aux) & 0xfff))

/* The seam's counter for fc_line_copy (arg: (void *)1 for ordered). */
static inline uint64_t fc_copy_counter(void *ordered)
{
    return fc_now_counter(ordered != 0);
}

#endif
