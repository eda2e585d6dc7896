/* Parsers for what the kernel and firmware publish about time: /proc/cpuinfo,
 * the kernel log, DMI strings, process names, and the doctor's fixture key
 * files.  Pure functions on text, so tests can feed captures from machines
 * we do not have (Xen, HPET, arm64, a TSC the watchdog rejected...). */
#ifndef FASTCLOCK_CLI_SYSPARSE_H
#define FASTCLOCK_CLI_SYSPARSE_H

#include <stddef.h>
#include <stdint.h>

/* Reads a whole file under root ("" = live system) into a malloc'd,
 * NUL-terminated buffer (at most max bytes).  Returns it, or NULL with *err
 * set to the errno. */
char *read_file_alloc(const char *root, const char *path, size_t max, size_t *len, int *err);

/* ---- /proc/cpuinfo -------------------------------------------------------- */

struct cpuinfo {
    int processors;         /* "processor" lines */
    char vendor_id[32];     /* x86: GenuineIntel, AuthenticAMD */
    char model_name[128];   /* x86: "model name"; arm64: derived from implementer/part */
    char flags[4096];       /* x86 "flags", arm64 "Features" */
    int is_arm;             /* arm64 layout (CPU implementer / Features) */
    unsigned implementer, part;
};
/* Fills *ci from the text of /proc/cpuinfo (first processor's block). */
void cpuinfo_parse(const char *text, struct cpuinfo *ci);
/* Name of an arm64 core from its MIDR implementer and part, or NULL. */
const char *arm_core_name(unsigned implementer, unsigned part);

/* The TSC flags the doctor reports, in display order. */
extern const char *const tsc_flag_names[6];

/* ---- kernel log ----------------------------------------------------------- */

enum klog_kind {
    KLOG_SWITCH,          /* clocksource: Switched to clocksource X */
    KLOG_TSC_UNSTABLE,    /* tsc: Marking TSC unstable due to REASON */
    KLOG_WATCHDOG,        /* clocksource watchdog marked clocksource X unstable */
    KLOG_WARP,            /* boot-time sync check measured N cycles of warp */
    KLOG_TSC_FREQ,        /* tsc: Detected / Refined ... MHz */
    KLOG_TSC_ADJUST,      /* firmware-written TSC_ADJUST found and corrected */
    KLOG_WATCHDOG_SKIP,   /* watchdog skipped a check: readout too slow (VM preemption) */
    KLOG_SKEW,            /* clocksource: CPUs ... ahead of / behind CPU n */
    KLOG_COUNTER_FREQ,    /* arm64 arch_timer frequency */
    KLOG_TIMER_ERRATUM,   /* arm64 arch_timer erratum workaround (vDSO may be off) */
    KLOG_FIRMWARE_BUG,    /* [Firmware Bug]: ... TSC ... */
    KLOG_KIND_COUNT
};
const char *klog_kind_name(enum klog_kind k);

#define KLOG_MAX_EVENTS 48

struct klog_event {
    enum klog_kind kind;
    double time_s;        /* seconds since boot, -1 if the line had no timestamp */
    char value[96];       /* clocksource name, unstable reason, ... */
    double number;        /* cycles of warp, Hz, ... */
    char text[240];       /* the message, as logged */
};

struct klog {
    int records;          /* lines/records parsed */
    double first_s;       /* timestamp of the oldest record (ring buffer start) */
    int nevents;
    int dropped;          /* events beyond KLOG_MAX_EVENTS */
    struct klog_event ev[KLOG_MAX_EVENTS];
    /* Summaries of the events. */
    char last_switch[64];          /* clocksource of the last switch, "" if none */
    double last_switch_s;
    int tsc_unstable;              /* the kernel marked the TSC unstable */
    char tsc_unstable_reason[96];
    double tsc_unstable_s;
    int watchdog_tsc;              /* ... the watchdog did, for the TSC */
    int watchdog_skips;
    int64_t warp_cycles;           /* largest boot-time warp, 0 if none */
    int warp_cpu_a, warp_cpu_b;
    double refined_hz, detected_hz;/* TSC frequency from the log, 0 if absent */
    int detected_is_tsc;           /* detected_hz came from "... MHz TSC", not "... MHz processor" */
    double counter_hz;             /* arm64 arch_timer */
    int timer_erratum;
    int tsc_adjust;
    int skew;
};

/* Parses kernel log text: /dev/kmsg records ("6,339,149568,-;msg"),
 * syslog(2) lines ("<6>[    0.149568] msg") or dmesg lines ("[ 0.149568] msg"),
 * one per line.  Continuation lines (starting with a space) are skipped. */
void klog_parse(const char *text, struct klog *out);

/* ---- DMI: which cloud ----------------------------------------------------- */

struct dmi {
    char sys_vendor[96], product_name[96], bios_vendor[96], bios_version[96];
    char chassis_asset_tag[96], board_vendor[96];
    int err;              /* errno when /sys/class/dmi/id was unreadable */
};
/* Name of the cloud or platform, e.g. "AWS EC2 (Nitro)", or "" if not
 * recognisable; *evidence says which string told. */
void cloud_detect(const struct dmi *d, char *name, size_t size, char *evidence, size_t esize);

/* ---- processes ------------------------------------------------------------ */

/* Canonical name of a time-synchronisation daemon from /proc/PID/comm
 * (15 characters at most), or NULL. */
const char *sync_daemon_name(const char *comm);

/* ---- clocksources --------------------------------------------------------- */

enum vdso_cap { VDSO_CAP_UNKNOWN, VDSO_CAP_YES, VDSO_CAP_IF_STABLE, VDSO_CAP_NO };
/* Can the vDSO read this clocksource without a system call? */
enum vdso_cap clocksource_vdso_cap(const char *name);
const char *vdso_cap_name(enum vdso_cap c);

/* ---- fixture key files ---------------------------------------------------- */

#define KV_MAX 256
struct kv_file {
    int n;
    struct { char key[80]; char value[520]; } item[KV_MAX]; /* a value: fastclock.reason, up to 511 */
};
/* "key = value" lines; '#' starts a comment line; later keys win.  Returns
 * 0, or -1 with a message in err for a malformed line. */
int kv_parse(const char *text, struct kv_file *kv, char *err, size_t esize);
const char *kv_get(const struct kv_file *kv, const char *key);

#endif
