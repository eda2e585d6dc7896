/*
 * The mode: can the counter be trusted, and how?  (tsc, tsc-percpu, system.)
 *
 * mode.c is the only writer of fc_mode, through fc_mode_enter; it also owns
 * what changes with the mode: the reason, the direct kernel path, and the
 * unit of fastclock_ticks().
 */
#ifndef FC_MODE_H
#define FC_MODE_H

#include "internal.h"

/* Written only by fc_mode_enter; everyone else loads it. */
FC_HIDDEN extern _Atomic int fc_mode;

enum fc_calibrator_pref { FC_CAL_AUTO = 0, FC_CAL_THREAD, FC_CAL_LAZY };

/* Runs the mode decision if nobody has; returns 1 if this call did it. */
FC_HIDDEN int fc_try_init(void);
/* 1 while another thread runs the mode decision (0 on that thread itself). */
FC_HIDDEN int fc_init_in_progress_elsewhere(void);
/* In a fork child: a decision left half-made by another thread is made again. */
FC_HIDDEN void fc_mode_after_fork_child(void);
/* Waits (bounded, never on the deciding thread itself) for a decision. */
FC_HIDDEN void fc_wait_decided(void);
/* Decides now if nobody has (status, ticks: they need the decision). */
FC_HIDDEN void fc_decide_now(void);
/* Mode tsc without a line yet: publish the first one now (clock.c). */
FC_HIDDEN void fc_first_line_now(void);
/* 1 once a clock was read before the decision (the calibrator thread then
 * decides a millisecond later). */

/*
 * The one way to change the mode, with the writer's lock (fc_cal_trylock)
 * held.  floor_ns: no MONOTONIC value returned from now on is below it (the
 * highest value the old mode may have returned; 0 at the decision).  Leaving
 * tsc for tsc-percpu or system publishes a line that routes every read to
 * the slow path, keeps fastclock_ticks() in its unit, records the reason and
 * wakes the calibrator.  Modes only degrade: tsc -> tsc-percpu -> system.
 */
FC_HIDDEN void fc_mode_enter(int mode, const char *reason, int64_t floor_ns);
/* A fork child whose parent had another thread leaving the global line
 * (calibration.c fc_cal_reset_in_child): that switch is finished here, to
 * the kernel's clocks held at floor_ns (the child has no per-CPU set-up). */
FC_HIDDEN void fc_mode_after_lost_switch(int64_t floor_ns);

FC_HIDDEN const char *fc_get_reason(void);
FC_HIDDEN int fc_mode_forced(void);

/* A kernel clock read in the vDSO's -errno convention. */
typedef int (*fc_direct_fn)(clockid_t, struct timespec *);
/* Mode system was decided at start-up: nothing was ever served from the
 * counter, so the kernel may answer unclamped (the preload shim may hand
 * calls to libc; clock.c's reads go straight to the vDSO, as where
 * fc_kernel_from_start says so). */
FC_HIDDEN int fc_system_from_start(void);
/* The fine clocks went to the kernel from the decision on (mode system, or
 * tsc-percpu routed there): clock.c's reads go straight to the vDSO. */
FC_HIDDEN int fc_kernel_from_start(void);
/* tsc-percpu: 1 when the kernel's clock answers the fine reads (its
 * clocksource is the counter: the cheaper read; mode.c says why).  Written
 * by mode.c alone, before the mode says tsc-percpu; inline, for the per-CPU
 * read's path through fastclock_gettime. */
FC_HIDDEN extern _Atomic int fc_percpu_kernel;
/* 1: the kernel's clock answers tsc-percpu's wall clocks (mode.c says why):
 * from the decision on, or once the kernel has passed the switch floor. */
FC_HIDDEN extern _Atomic int fc_percpu_wall_kernel;
FC_INLINE int fc_percpu_to_kernel(void)
{
    return atomic_load_explicit(&fc_percpu_kernel, memory_order_acquire);
}

/* fastclock_ticks() and fastclock_ticks_to_ns(): raw counter reads while 1. */
FC_HIDDEN extern _Atomic int fc_ticks_raw;
FC_HIDDEN extern _Atomic int fc_ticks_in_ns;
FC_HIDDEN extern _Atomic(fc_direct_fn) fc_ticks_direct; /* where ticks in ns are read; NULL until then */
/* Ticks synthesised from MONOTONIC since the mode left tsc (0: not). */
FC_HIDDEN int fc_ticks_synthesised(void);
/* MONOTONIC ns -> ticks in the process's unit (synthesised, or ns). */
FC_HIDDEN uint64_t fc_ticks_synth(int64_t mono);
FC_HIDDEN int64_t fc_ticks_to_ns(uint64_t ticks);
/* fastclock_ticks()' unit per second where no line answers: 1e9 where
 * ticks are ns, else the counter's rate they are synthesised at. */
FC_HIDDEN double fc_ticks_hz(void);
/* A ticks read with the mode still undecided here (a handler on the
 * deciding thread, a decision over 100 ms late): fixes the unit at ns of
 * MONOTONIC unless the decision has fixed it already, and reads it. */
FC_HIDDEN uint64_t fc_ticks_before_decision(void);

/* With the lock held: recalibrate the global line; on failure, mode system. */
FC_HIDDEN int fc_mode_recalibrate(void);
/* With the lock held: leave the counter for the kernel's clocks, for good. */
FC_HIDDEN void fc_mode_fail_to_system(const char *reason);
/* A fork child that starts in a new time namespace (calibrator.c's atfork
 * child; parent_t, parent_mono: a counter read and the parent's MONOTONIC
 * just before the fork).  Returns 1 where it left the lines for the
 * kernel's clocks. */
FC_HIDDEN int fc_mode_after_timens_change(uint64_t parent_t, int64_t parent_mono);
/* Calibrator thread: the warp check found a warp (takes the lock itself).
 * 0 when the lock was busy (a reader's moment): the caller tries again. */
FC_HIDDEN int fc_mode_switch_to_percpu(const char *why);
/* Mode tsc on a counter the kernel listed as a stable clocksource at the
 * decision: where it has left that list since (the kernel's watchdog marked
 * it unstable, or a CPU brought online failed the kernel's TSC sync check),
 * per-CPU lines (fc_mode_switch_to_percpu), or the kernel's clocks where they
 * cannot be had.  Reads sysfs: the calibrator thread's, every few seconds.
 * Returns 1 where it switched. */
FC_HIDDEN int fc_mode_recheck_kernel_trust(void);

/* Flavour the process uses by default for the fine clocks (the preload shim
 * with FASTCLOCK_UNORDERED=1 sets unordered); reported by fastclock_status. */
FC_HIDDEN void fc_set_default_unordered(int unordered);
FC_HIDDEN int fc_default_unordered(void);

FC_HIDDEN enum fc_calibrator_pref fc_calibrator_pref(void);
/* The library's constructor: FASTCLOCK_MODE read now, once, for the
 * decision (which may run in a signal handler, where the environment is not
 * safe to read); fc_mode_read_env reads it again (tests). */
FC_HIDDEN void fc_mode_env_at_load(void);
FC_HIDDEN void fc_mode_read_env(void);
/* v as a message about it may show it (out: at least 44 bytes): its first
 * 40 bytes, "..." after more, control characters as '?'. */
FC_HIDDEN const char *fc_env_echo(const char *v, char *out, size_t size);
/* "fastclock: ignoring NAME=v: rule", v as fc_env_echo shows it: one write to
 * descriptor 2 (async-signal-safe). */
FC_HIDDEN void fc_env_ignored(const char *name, const char *v, const char *rule);
/* A FASTCLOCK_* value v is the word (lower-case), ignoring ASCII case and
 * blanks around it. */
FC_HIDDEN int fc_env_word(const char *v, const char *word);
/* A FASTCLOCK_* on/off value (FASTCLOCK_UNORDERED): 0 for 0/no/false or
 * blank, 1 for 1/yes/true (fc_env_word's way), -1 for any other word. */
FC_HIDDEN int fc_env_flag(const char *v);
/* Preload shim: prefer lazy calibration unless FASTCLOCK_CALIBRATOR says
 * otherwise (weak default in defaults.c, strong override in preload.c). */
FC_HIDDEN extern const int fc_default_lazy;
/* Resets everything to "never initialised" (tests only; no reader may run). */
FC_HIDDEN void fc_reset_for_tests(void);

#endif
