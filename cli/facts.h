/* Everything `fastclock doctor` knows about a machine's time: what it
 * detected (CPU, kernel, log, sync state) and what it measured (cost of
 * each clock, whether it enters the kernel, warp, fastclock's own speed).
 *
 * Filled from the live system (probe.c, measure.c) or from a capture
 * directory (--root DIR, fixture.c); read by the findings engine
 * (findings.c) and the reports (report.c).  Unknown facts carry the errno
 * or text that says why. */
#ifndef FASTCLOCK_CLI_FACTS_H
#define FASTCLOCK_CLI_FACTS_H

#include <stdint.h>

#include "sysparse.h"
#include "util.h"

/* Clock ids the doctor measures, in report order. */
#define FACT_NCLOCKS 11
/* gettimeofday() and time() ride along with the clock ids. */
#define FACT_NCALLS (FACT_NCLOCKS + 2)
#define CALL_GETTIMEOFDAY FACT_NCLOCKS
#define CALL_TIME (FACT_NCLOCKS + 1)

struct clock_fact {
    const char *name;      /* "CLOCK_MONOTONIC", "gettimeofday", "time" */
    int id;                /* clockid_t, -1 for gettimeofday/time */
    int supported;         /* tri: the call works here */
    int err;               /* errno when unsupported */
    double libc_ns;        /* NaN: not measured */
    double syscall_ns;
    int enters_kernel;     /* tri */
    char verdict[96];      /* how enters_kernel was decided, or why it is unknown */
    double res_ns;         /* clock_getres, NaN if unknown */
    double step_ns;        /* smallest observed non-zero step, NaN if none seen */
};

struct doctor_facts {
    /* Provenance. */
    int live;               /* 1: this machine; 0: a capture under root */
    char root[512];
    int quick;
    double elapsed_s;

    char arch[32];          /* "x86_64", "aarch64" */
    char kernel_release[128];
    int kernel_err;
    int cpus;               /* online CPUs */

    /* CPU (CPUID on x86; /proc/cpuinfo elsewhere). */
    int has_cpuid;
    char vendor[32];
    char model[128];
    unsigned family, model_number;
    int invariant_tsc;      /* tri */
    char invariant_source[64];
    int has_rdtscp;         /* tri */
    struct cpuinfo cpuinfo;
    int cpuinfo_err;        /* errno reading /proc/cpuinfo, 0 if read */
    int flag[6];            /* tri per tsc_flag_names */

    /* Hypervisor and cloud. */
    int hypervisor;         /* tri: CPUID.1:ECX[31] */
    char hv_signature[16];
    char hv_name[48];
    uint32_t hv_max_leaf;
    struct dmi dmi;
    char cloud[64];
    char cloud_evidence[160];

    /* Counter frequency. */
    double cpuid_tsc_hz;    /* 0 if CPUID does not say */
    char cpuid_tsc_source[64];
    double measured_tsc_hz; /* against CLOCK_MONOTONIC_RAW, 0 if not measured */
    char measured_err[96];
    double tsc_hz;          /* best nominal value, 0 if none */
    char tsc_hz_source[64];

    /* Clocksource. */
    char cs_current[64];
    char cs_available[512];
    int cs_current_err, cs_available_err;
    enum vdso_cap cs_vdso;

    /* Kernel command line. */
    int cmdline_err;
    /* A timer erratum the kernel keys on the device tree or the CPU part
     * (the library's fc_counter_erratum, from files: no kernel log needed). */
    int counter_erratum;
    char counter_erratum_why[320];
    char cmdline[4096];
    char p_clocksource[64];  /* "" if absent */
    char p_tsc[64];
    int p_notsc, p_vdso_off;

    /* Kernel log. */
    int klog_readable;
    int klog_err;           /* errno when unreadable */
    char klog_source[48];   /* "/dev/kmsg", "syslog(2)", "fixture" */
    struct klog klog;

    /* vDSO and the clocks. */
    int vdso_present;       /* tri: AT_SYSINFO_EHDR */
    int seccomp_ok;         /* tri: the seccomp verdict could run */
    char seccomp_err[128];
    struct clock_fact call[FACT_NCALLS];

    /* Cross-CPU warp (fc_warp_check). */
    int warp_ran;
    char warp_err[128];
    int64_t warp_max_cycles;
    int warp_pairs, warp_pairs_skipped, warp_pairs_unpinned; /* unpinned: of the skipped */
    uint64_t warp_iterations, warp_count;
    int warp_cpu_a, warp_cpu_b;
    char warp_insn[24]; /* the ordered read it used ("" unknown) */

    /* adjtimex and daemons. */
    int sync_known;
    char sync_err[96];
    int sync_state;          /* adjtimex return: TIME_OK ... TIME_ERROR */
    long sync_status;        /* STA_* bits */
    int synchronized;        /* tri */
    int64_t maxerror_us, esterror_us;
    double offset_ns, freq_ppm;
    int tai_offset_s;
    int leap_pending;        /* +1 insert, -1 delete, 0 none */
    int daemons_scanned;
    char daemons_err[96];
    char daemons[128];       /* space-separated canonical names */

    /* fastclock itself. */
    int fc_known;
    char fc_mode[32], fc_calibrator[32], fc_counter[64]; /* counter: "clock_gettime (ordered), rdtsc (unordered)" fits */
    char fc_reason[512];   /* the library's reasons run to 511 bytes */
    int fc_forced;         /* FASTCLOCK_MODE chose the mode */
    double fc_counter_hz;
    int64_t fc_error_bound_ns;
    double fc_ns, fc_unordered_ns, fc_coarse_ns;
    double fc_gettime_ns; /* fastclock_gettime(CLOCK_MONOTONIC): what clock_gettime costs under the shim */
};

/* Initialises every field to "unknown". */
void facts_init(struct doctor_facts *f);

/* The warp check found the CPUs' counters apart: by more than a nanosecond's
 * cycles (at the nominal rate; any cycle where it is unknown).  Less is
 * KVM's per-vCPU offsets, which fastclock's own check counts as in step
 * (src/warp.h fc_warp_sub_ns_cycles). */
int warp_found(const struct doctor_facts *f);

/* Why the warp check skipped its skipped pairs, a few words: threads that
 * could not be pinned, or CPUs too busy to take turns. */
const char *warp_skip_why(const struct doctor_facts *f);

/* Index of a clock fact by name ("CLOCK_MONOTONIC"), or -1. */
int facts_call_index(const char *name);

/* Names of the clock ids in order (and their ids on Linux). */
extern const char *const fact_call_names[FACT_NCALLS];
extern const int fact_clock_ids[FACT_NCLOCKS];

#endif
