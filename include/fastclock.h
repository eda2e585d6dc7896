/*
 * fastclock — the kernel's clocks at the cost of one counter read.
 *
 * Every function here is thread-safe, async-signal-safe and fork-safe, and
 * never fails for the clocks it serves: when the time-stamp counter cannot
 * be trusted the library reads the kernel's clocks instead (mode "system")
 * and says why in fastclock_status().  (The functions that take a pointer
 * fail as their kernel counterparts do for a bad one; below.  Where the
 * kernel itself refuses a clock -- a seccomp filter refusing the system
 * call its vDSO falls back to, with no line that can answer -- the call
 * fails as the kernel's does, and the *_ns functions return 0.)
 *
 * Guarantees in mode "tsc" (each one is proven by a test in tests/):
 *   - fastclock_mono_ns(), fastclock_real_ns() and fastclock_gettime() are
 *     *ordered* reads: a read that happens after another read (in the C11
 *     happens-before sense: same thread, or ordered by a lock, an atomic or
 *     a fork) never returns a smaller CLOCK_MONOTONIC value.
 *     Across CPUs this rests on their counters being in step: the kernel
 *     checks them when it brings a CPU up (unless it was told they are
 *     reliable, as in many VMs), and the calibrator thread runs a
 *     check_tsc_warp of its own at start-up (up to 4 CPU pairs, "tsc-percpu"
 *     where they disagree by a nanosecond or more).  The lazy calibrator
 *     (FASTCLOCK_CALIBRATOR=lazy, the preload shim's default), which starts
 *     no thread, only compares its own samples as they land on different
 *     CPUs and leaves mode "tsc" for a disagreement beyond 2 us: a smaller
 *     warp that the kernel missed shows, there, as reads that go back by up
 *     to its size (status max_warp_cycles is the largest disagreement its samples
 *     showed beyond their slack: a lower bound, -1 until two samples landed on
 *     different CPUs).
 *   - The *_unordered() variants skip the counter fence.  They are monotonic
 *     within a thread only: the CPU may execute the counter read early, so a
 *     read ordered after another thread's read by a lock can come out earlier
 *     by up to the CPU's out-of-order window around the counter read
 *     (measured on an AMD EPYC KVM guest: through a mutex usually 0-20 ns,
 *     but in about 1 run in 60 of 2 M reads up to ~1-1.5 us, presumably
 *     while the lock's acquisition stalled and the bare read ran ahead;
 *     ordered reads never went back in the same runs; up to 186 ns through
 *     a lock-free atomic hand-off; tests/guarantees_test.cc and the Java
 *     MonotonicTest print it).  Use them for
 *     intervals measured by one thread, where they cost about half as much;
 *     never where another thread's reads are compared (a JVM).
 *   - |fastclock - kernel| stays within the bound reported in
 *     fastclock_status().error_bound_ns at that moment (the error is ~20 ns
 *     p99 on a quiet machine; the bound also covers the largest change
 *     adjtimex permits since the library last looked at the line against
 *     the kernel -- 1/9 through the tick (2/9 where the tick is not known)
 *     and 1000 ppm through the frequency, each with half again as margin:
 *     ~17% of the time since that look (~33% with the tick unknown);
 *     readers look once per millisecond of reading, so ~0.05 ms on
 *     average), at any uptime: the scale is re-calibrated continuously and
 *     corrections are slewed, never stepped backwards; a change made and
 *     undone between two looks is inside the bound too.
 *   - CLOCK_REALTIME (and TAI) follow the kernel's steps (settimeofday,
 *     leap seconds, resume) at the first read that starts after the step:
 *     each fine read adds the kernel's own REALTIME - MONOTONIC offset,
 *     checked against the vDSO's CLOCK_REALTIME_COARSE.  The coarse
 *     REALTIME clock served from memory follows when the calibrator thread
 *     next ticks (the step wakes it).
 * Mode "tsc-percpu" (CPUs whose counters disagree): one line per CPU,
 * selected by rdtscp; monotonic within a thread; across threads a read may
 * come out below an earlier one by at most the error bound reported just
 * before or just after it, the larger (in this mode the bound adds the two
 * largest CPUs' bounds: one CPU's line may be ahead of the kernel while
 * another's is behind; a line that was behind may be recalibrated forward
 * at any moment, and its bound shrinks with it).
 * Mode "system" has the kernel's own guarantees.
 *
 * The mode is decided by trust alone (never by cost), and only once the
 * process reads the time often (a thread's 32nd read, or 1 ms after the first with the
 * calibrator thread); until then the kernel's vDSO answers every read.
 *
 * Environment (read with secure_getenv when the library loads: setuid programs
 * ignore it, and a change made later, in main, is not seen):
 *   FASTCLOCK_MODE=auto|tsc|percpu|tsc-percpu|system   (default auto; percpu and tsc-percpu
 *     are the same mode; forced modes still refuse when unsafe)
 *   FASTCLOCK_CALIBRATOR=auto|thread|lazy
 */
#ifndef FASTCLOCK_H
#define FASTCLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <sys/time.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FASTCLOCK_VERSION_MAJOR 0
#define FASTCLOCK_VERSION_MINOR 1
#define FASTCLOCK_VERSION_PATCH 0

/* Nanoseconds on the kernel's CLOCK_MONOTONIC timeline. */
int64_t fastclock_mono_ns(void);
/* Nanoseconds since the Unix epoch on the kernel's CLOCK_REALTIME (UTC) timeline. */
int64_t fastclock_real_ns(void);

/* Same timelines without the counter fence: monotonic per thread only. */
int64_t fastclock_mono_ns_unordered(void);
int64_t fastclock_real_ns_unordered(void);

/* Cheap clocks, ~1 ns per call while the calibrator thread ticks them
 * (every ~1 ms; on a busy machine they lag further by as long as that thread
 * waits for a CPU: measured with 16 spinning threads on 2 vCPUs, 0.6 ms at
 * the median but up to ~200 ms), else the kernel's coarse clocks (a tick,
 * ~4 ms, whatever the load).  The coarse MONOTONIC is monotonic and never
 * ahead of the fine one by more than its error bound; the coarse REALTIME
 * follows a clock_settime at the ticker's next tick (the step wakes it),
 * until then where the fine REALTIME was before the step. */
int64_t fastclock_mono_coarse_ns(void);
int64_t fastclock_real_coarse_ns(void);

/* The raw counter (TSC on x86-64), unordered: for bracketing an operation
 * in one thread.  Its unit is fixed when the mode is decided: nanoseconds of
 * CLOCK_MONOTONIC where the decision was "system" or "tsc-percpu", counter
 * ticks where it was "tsc" (kept after a later fall to "system") -- unless a
 * read that could not wait for the decision (a signal handler on the
 * deciding thread) fixed nanoseconds first.  Convert with
 * fastclock_ticks_to_ns, never by assuming the unit.  When mode "tsc" ends,
 * ticks go on from MONOTONIC at the last rate, starting 1 ms plus the largest
 * warp the warp check measured above the counter then: an interval across
 * that switch is never negative where the CPUs' counters differed by less
 * (a switch because the kernel dropped the TSC comes with no measurement),
 * and reads up to that much long. */
uint64_t fastclock_ticks(void);
/* A difference of two fastclock_ticks() values, in nanoseconds. */
int64_t fastclock_ticks_to_ns(uint64_t ticks);

/* clock_gettime(2) semantics.  CLOCK_REALTIME, CLOCK_MONOTONIC, their
 * _COARSE forms, CLOCK_BOOTTIME and CLOCK_TAI are served by fastclock; every
 * other id goes to the kernel, with its return value and errno.  A NULL ts
 * gives -1/EFAULT instead of a crash.  A ts that is neither NULL nor valid
 * is written through (SIGSEGV), as libc's vDSO does; where the kernel
 * answers a served clock with a system call (mode system on a clocksource
 * the vDSO cannot read: hpet, acpi_pm) the call returns the kernel's
 * -errno itself (-EFAULT; -EPERM where a seccomp filter refuses the system
 * call) rather than -1 with errno set: those calls jump straight into the
 * vDSO, as the cheapest route must.  So do the _COARSE ids in mode system
 * (the kernel's coarse clock directly), tsc-percpu's route to the kernel,
 * and every served id on a kernel
 * without a vDSO (vdso=0), whose system call answers the same way (and
 * there sets errno too). */
int fastclock_gettime(clockid_t id, struct timespec *ts);
/* gettimeofday(2) semantics; a non-NULL tz is filled by the kernel, tv as
 * without one (so calls with and without tz keep their order).  Where the
 * kernel's clock answers it with a system call, as for fastclock_gettime
 * above, a refusal comes back as the kernel's -errno itself. */
int fastclock_gettimeofday(struct timeval *tv, void *tz);

struct fastclock_status {
    const char *mode;        /* "tsc", "tsc-percpu" or "system"; "initializing" only where another
                                thread's decision had not finished after a 100 ms wait (a
                                decider stopped by a debugger or starved of CPU) */
    const char *reason;      /* one sentence: why this mode; valid for the process lifetime */
    const char *calibrator;  /* "thread", "lazy" (calibrated by readers) or "none" */
    const char *counter;     /* how the default fine clocks read MONOTONIC: "rdtscp" or
                                "lfence;rdtsc" (ordered), "rdtsc" (unordered), or "clock_gettime"
                                first where the kernel's clock answers (some or all of them:
                                the words after it say which).  The wall clocks read the same
                                way where real_source is "line"; see real_source */
    double   counter_hz;     /* counter ticks per second of CLOCK_MONOTONIC (current estimate); in
                                mode system, fastclock_ticks()' unit per second (1e9: ns) */
    uint64_t calibrations;   /* successful calibrations since start */
    int64_t  last_calibration_age_ns; /* time since the last calibration (tsc-percpu: the stalest CPU's), -1 if none */
    int64_t  calibration_interval_ns; /* current target interval between calibrations */
    int64_t  last_error_ns;  /* fastclock - kernel MONOTONIC, measured at the last calibration */
    int64_t  max_error_ns;   /* largest |last_error_ns| seen since start */
    int64_t  error_bound_ns; /* current bound on |fastclock - kernel's clock| (MONOTONIC and REALTIME);
                                in tsc-percpu mode the two largest CPU bounds added, which also
                                bounds steps back across threads */
    int64_t  sample_width_ns;/* width of the best kernel sample at the last calibration */
    uint64_t fallback_reads; /* reads answered by the kernel while in mode "tsc" (its first line
                                pending, a line run out while another thread recalibrates) */
    uint64_t realtime_steps; /* REALTIME steps followed */
    int      ordered;        /* 1: the process's default fine reads (fastclock_mono_ns, and under the
                                preload shim clock_gettime) are ordered across threads (in
                                tsc-percpu on its own lines: within error_bound_ns); 0 when the
                                shim was asked for unordered reads (FASTCLOCK_UNORDERED=1) */
    int      forced;         /* 1: FASTCLOCK_MODE chose the mode */
    int64_t  real_error_bound_ns; /* bound on |fastclock_real_ns - true UTC|: error_bound_ns (0 where
                                     the kernel's own clock answers fastclock_real_ns from the
                                     first line on: real_source "vdso") plus the kernel's own maxerror as of the last adjtimex
                                     poll (at most 1 s ago; fastclock_real_bounded also notices a
                                     step of REALTIME since, and says 16 s) */
    int      kernel_synchronized; /* 1: NTP/PTP disciplines the kernel, 0: not, -1: unknown */
    int      cpus_calibrated;     /* tsc-percpu: CPUs with their own line */
    int64_t  kernel_maxerror_ns;  /* adjtimex maxerror now (-1 unknown) */
    int64_t  kernel_esterror_ns;  /* adjtimex esterror (-1 unknown) */
    int64_t  max_warp_cycles;     /* cross-CPU warp check: largest warp seen beyond its slack (a lower
                                     bound), -1 if not run; a warp found once and not by a second
                                     check at once, every pair in step, is a blip and not counted */
    double   read_ns;             /* fastclock_mono_ns, measured once, at the first fastclock_status()
                                     call in mode tsc with a line (0: not measured; kept after a
                                     switch to another mode, 0 where mode tsc never had a line) */
    double   kernel_read_ns;      /* the kernel's clock_gettime(CLOCK_MONOTONIC), measured with the
                                     first line, when the read instruction is chosen */
    const char *real_source;      /* who answers fastclock_real_ns (and the other ordered wall clocks):
                                     "line" (MONOTONIC from the counter plus the kernel's REALTIME
                                     offset, checked on every read) or "vdso" (the kernel's own
                                     clock_gettime: mode system, or a kernel whose clocksource is the
                                     TSC, where that was timed cheaper than line plus check) */
    uint64_t reserved[1];    /* new fields go after it */
    double   real_line_ratio; /* mode tsc on a kernel whose clocksource is the counter (tsc;
                                 arm64: arch_sys_counter): its REALTIME's cost over the line's, timed
                                 with the first line (the line answers the ordered wall clocks at
                                 1.04 or more, twice; this is the nearer of the two); 0: not timed
                                 (another clocksource, no vDSO, the ordered reads routed to the
                                 kernel, another mode, or no line yet) */
};

/* Fills *out; returns 0, or -1 with errno EFAULT for a NULL pointer.
 * (In C++, name the type `struct fastclock_status`: the function hides it.)
 *
 * ABI: new fields are only ever added at the end.  A call compiled against
 * this header passes sizeof(struct fastclock_status) through the macro, and
 * the library writes no more than that: a program built against an older,
 * smaller struct keeps working with a newer library (fields it does not know
 * are not written), and one built against a newer header gets zeros for
 * fields an older library does not have.  fastclock_status_sized takes the
 * size explicitly (e.g. from another language); the plain symbol
 * fastclock_status remains for binaries built before the macro. */
#if defined(__cplusplus) && defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#endif
int fastclock_status(struct fastclock_status *out);
int fastclock_status_sized(struct fastclock_status *out, size_t size);
#if defined(__cplusplus) && defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#define fastclock_status(out) fastclock_status_sized((out), sizeof(struct fastclock_status))

/* An interval that contains true UTC now, in the spirit of AWS ClockBound:
 * fastclock's own error against the kernel's REALTIME plus the kernel's
 * maxerror (grown at 500 ppm since NTP last set it, as the kernel does).
 * Returns 0 when a daemon synchronises the kernel, 1 when it does not or
 * that cannot be asked (adjtimex refused: a sandbox), -1 with errno EFAULT
 * for NULL pointers.  The kernel's maxerror is the last one adjtimex gave,
 * grown since; 16 s (an unsynchronised clock's) where adjtimex never
 * answered, or where REALTIME was stepped since it last did. */
int fastclock_real_bounded(int64_t *earliest_ns, int64_t *latest_ns);

/* Version string, e.g. "0.1.0". */
const char *fastclock_version(void);

#ifdef __cplusplus
}
#endif

#endif /* FASTCLOCK_H */
