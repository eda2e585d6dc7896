/* Detection: what the CPU, the kernel and the processes say about time. */
#define _GNU_SOURCE
#include "probe.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/klog.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/timex.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cpu.h"
#include "kernel.h"
#include "warp.h"

const char *const fact_call_names[FACT_NCALLS] = {
    "CLOCK_REALTIME",        "CLOCK_MONOTONIC",      "CLOCK_PROCESS_CPUTIME_ID", "CLOCK_THREAD_CPUTIME_ID",
    "CLOCK_MONOTONIC_RAW",   "CLOCK_REALTIME_COARSE", "CLOCK_MONOTONIC_COARSE",  "CLOCK_BOOTTIME",
    "CLOCK_REALTIME_ALARM",  "CLOCK_BOOTTIME_ALARM", "CLOCK_TAI",                "gettimeofday",
    "time",
};
const int fact_clock_ids[FACT_NCLOCKS] = {
    CLOCK_REALTIME,      CLOCK_MONOTONIC,       CLOCK_PROCESS_CPUTIME_ID, CLOCK_THREAD_CPUTIME_ID,
    CLOCK_MONOTONIC_RAW, CLOCK_REALTIME_COARSE, CLOCK_MONOTONIC_COARSE,   CLOCK_BOOTTIME,
    CLOCK_REALTIME_ALARM, CLOCK_BOOTTIME_ALARM, CLOCK_TAI,
};

void facts_init(struct doctor_facts *f)
{
    memset(f, 0, sizeof *f);
    f->invariant_tsc = f->has_rdtscp = f->hypervisor = TRI_UNKNOWN;
    for (int i = 0; i < 6; i++)
        f->flag[i] = TRI_UNKNOWN;
    f->cpuinfo_err = ENOENT;
    f->cs_current_err = f->cs_available_err = ENOENT;
    f->cmdline_err = ENOENT;
    f->kernel_err = ENOENT;
    f->klog_err = ENOENT;
    f->dmi.err = ENOENT;
    f->vdso_present = TRI_UNKNOWN;
    f->seccomp_ok = TRI_UNKNOWN;
    f->synchronized = TRI_UNKNOWN;
    f->measured_tsc_hz = 0;
    copy_str(f->measured_err, sizeof f->measured_err, "not measured");
    copy_str(f->warp_err, sizeof f->warp_err, "not measured");
    copy_str(f->sync_err, sizeof f->sync_err, "not read");
    copy_str(f->daemons_err, sizeof f->daemons_err, "not scanned");
    copy_str(f->seccomp_err, sizeof f->seccomp_err, "not run");
    f->warp_cpu_a = f->warp_cpu_b = -1;
    f->fc_ns = f->fc_unordered_ns = f->fc_coarse_ns = f->fc_gettime_ns = NAN;
    f->fc_counter_hz = NAN;
    f->fc_error_bound_ns = -1;
    for (int i = 0; i < FACT_NCALLS; i++) {
        struct clock_fact *c = &f->call[i];
        c->name = fact_call_names[i];
        c->id = i < FACT_NCLOCKS ? fact_clock_ids[i] : -1;
        c->supported = TRI_UNKNOWN;
        c->libc_ns = c->syscall_ns = c->res_ns = c->step_ns = NAN;
        c->enters_kernel = TRI_UNKNOWN;
        copy_str(c->verdict, sizeof c->verdict, "not measured");
    }
}

int warp_found(const struct doctor_facts *f)
{
    /* The library's own tolerance; any cycle where the rate is unknown. */
    int64_t sub_ns = f->tsc_hz > 0 ? fc_warp_sub_ns_cycles(1e9 / f->tsc_hz) : 0;
    return f->warp_ran && f->warp_max_cycles > sub_ns;
}

const char *warp_skip_why(const struct doctor_facts *f)
{
    if (f->warp_pairs_unpinned <= 0)
        return "busy CPUs";
    return f->warp_pairs_unpinned >= f->warp_pairs_skipped ? "threads could not be pinned"
                                                           : "some threads could not be pinned, other CPUs were busy";
}

int facts_call_index(const char *name)
{
    for (int i = 0; i < FACT_NCALLS; i++)
        if (strcmp(fact_call_names[i], name) == 0)
            return i;
    return -1;
}

/* ---- files under root --------------------------------------------------- */

static void read_dmi(struct dmi *d, const char *root)
{
    static const struct { const char *file; size_t off; } fields[] = {
        {"sys_vendor", offsetof(struct dmi, sys_vendor)},
        {"product_name", offsetof(struct dmi, product_name)},
        {"bios_vendor", offsetof(struct dmi, bios_vendor)},
        {"bios_version", offsetof(struct dmi, bios_version)},
        {"chassis_asset_tag", offsetof(struct dmi, chassis_asset_tag)},
        {"board_vendor", offsetof(struct dmi, board_vendor)},
    };
    memset(d, 0, sizeof *d);
    int any = 0, first_err = 0;
    for (unsigned i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        char path[128];
        snprintf(path, sizeof path, "/sys/class/dmi/id/%s", fields[i].file);
        char *dst = (char *)d + fields[i].off;
        int r = fc_read_text(root, path, dst, 96);
        if (r >= 0)
            any = 1;
        else if (!first_err)
            first_err = -r;
    }
    d->err = any ? 0 : (first_err ? first_err : ENOENT);
}

static void scan_daemons(struct doctor_facts *f, const char *root)
{
    char path[600];
    snprintf(path, sizeof path, "%s/proc", root);
    DIR *dir = opendir(path);
    f->daemons[0] = 0;
    if (!dir) {
        snprintf(f->daemons_err, sizeof f->daemons_err, "%s: %s", "/proc", fc_errno_text(errno));
        return;
    }
    struct sbuf b;
    sb_init(&b, f->daemons, sizeof f->daemons);
    struct dirent *de;
    while ((de = readdir(dir))) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        char rel[64], comm[64];
        snprintf(rel, sizeof rel, "/proc/%.20s/comm", de->d_name);
        if (fc_read_text(root, rel, comm, sizeof comm) <= 0)
            continue;
        const char *name = sync_daemon_name(comm);
        if (name && !fc_word_in_list(f->daemons, name))
            sb_printf(&b, "%s%s", b.len ? " " : "", name);
    }
    closedir(dir);
    f->daemons_scanned = 1;
    f->daemons_err[0] = 0;
}

void probe_files(struct doctor_facts *f, const char *root)
{
    size_t len;
    int err;
    char *text = read_file_alloc(root, "/proc/cpuinfo", 8 << 20, &len, &err);
    if (text) {
        cpuinfo_parse(text, &f->cpuinfo);
        free(text);
        /* On x86 the flags are what is read from it: without a flags line (a
         * trimmed capture, an emulator's cpuinfo) each is unknown, not absent. */
        f->cpuinfo_err = (f->cpuinfo.is_arm ? f->cpuinfo.processors != 0 : f->cpuinfo.flags[0] != 0) ? 0 : ENODATA;
    } else {
        f->cpuinfo_err = err;
    }
    if (!f->cpuinfo_err && !f->cpuinfo.is_arm)
        for (int i = 0; i < 6; i++)
            f->flag[i] = fc_word_in_list(f->cpuinfo.flags, tsc_flag_names[i]) ? TRI_YES : TRI_NO;

    struct fc_clocksource_info cs;
    fc_clocksource_read(root, &cs);
    copy_str(f->cs_current, sizeof f->cs_current, cs.current);
    copy_str(f->cs_available, sizeof f->cs_available, cs.available);
    f->cs_current_err = cs.current_errno;
    f->cs_available_err = cs.available_errno;
    f->cs_vdso = cs.current_errno ? VDSO_CAP_UNKNOWN : clocksource_vdso_cap(cs.current);

    int r = fc_read_text(root, "/proc/cmdline", f->cmdline, sizeof f->cmdline);
    f->cmdline_err = r < 0 ? -r : 0;
    if (r >= 0) {
        char v[64];
        fc_cmdline_param(f->cmdline, "clocksource", f->p_clocksource, sizeof f->p_clocksource);
        fc_cmdline_param(f->cmdline, "tsc", f->p_tsc, sizeof f->p_tsc);
        f->p_notsc = fc_word_in_list(f->cmdline, "notsc");
        f->p_vdso_off = fc_cmdline_param(f->cmdline, "vdso", v, sizeof v) && strcmp(v, "0") == 0;
    }

    r = fc_read_text(root, "/proc/sys/kernel/osrelease", f->kernel_release, sizeof f->kernel_release);
    f->kernel_err = r < 0 ? -r : (r == 0 ? ENODATA : 0);

    read_dmi(&f->dmi, root);
    cloud_detect(&f->dmi, f->cloud, sizeof f->cloud, f->cloud_evidence, sizeof f->cloud_evidence);

    scan_daemons(f, root);
    f->counter_erratum = fc_counter_erratum(root, f->counter_erratum_why, sizeof f->counter_erratum_why);
}

/* ---- the running machine ------------------------------------------------ */

/* The kernel log: /dev/kmsg (one record per read), else syslog(2). */
char *klog_read_live(int *err, char *source, size_t ssize)
{
    int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode) || major(st.st_rdev) != 1 || minor(st.st_rdev) != 11)) {
        /* Not the kernel's log: a container's /dev/null, a FIFO or a file in its place. */
        close(fd);
        fd = -1;
        errno = ENODEV;
    }
    if (fd >= 0) {
        size_t cap = 1 << 20, len = 0;
        char *text = malloc(cap);
        char rec[8192];
        int read_err = 0;
        if (!text) {
            close(fd);
            *err = ENOMEM;
            return NULL;
        }
        for (;;) {
            /* The whole buffer: a record is at most 8192 bytes (CONSOLE_EXT_LOG_MAX),
             * and one longer than the buffer fails with EINVAL without being consumed. */
            ssize_t n = read(fd, rec, sizeof rec);
            if (n < 0) {
                if (errno == EINTR || errno == EPIPE) /* EPIPE: records overwritten meanwhile */
                    continue;
                /* EAGAIN: the end.  Anything else ends the log there: what was
                 * read stands, and only a first read that fails means no log. */
                if (errno != EAGAIN && len == 0)
                    read_err = errno;
                break;
            }
            if (n == 0)
                break;
            if (len + (size_t)n + 2 > cap) {
                if (cap >= (16u << 20))
                    break;
                char *nt = realloc(text, cap * 2);
                if (!nt)
                    break;
                text = nt;
                cap *= 2;
            }
            memcpy(text + len, rec, (size_t)n);
            len += (size_t)n;
            if (text[len - 1] != '\n')
                text[len++] = '\n';
        }
        close(fd);
        if (read_err == 0 && len > 0) {
            text[len] = 0;
            copy_str(source, ssize, "/dev/kmsg");
            *err = 0;
            return text;
        }
        /* Opened, but no record came (a kernel log always has some): the
         * other way in, or this reason. */
        free(text);
        errno = read_err ? read_err : ENODATA;
    }
    int open_err = errno;
    int size = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
    if (size > 0) {
        char *text = malloc((size_t)size + 1);
        if (text) {
            int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, text, size);
            if (n >= 0) {
                text[n] = 0;
                copy_str(source, ssize, "syslog(2)");
                *err = 0;
                return text;
            }
            free(text);
        }
    }
    /* Say why /dev/kmsg failed: that is the first thing a user checks. */
    *err = open_err;
    return NULL;
}

void facts_set_adjtimex(struct doctor_facts *f, const struct timex *tx, int state)
{
    f->sync_known = 1;
    f->sync_err[0] = 0;
    f->sync_state = state;
    f->sync_status = tx->status;
    f->synchronized = (!(tx->status & STA_UNSYNC) && state != TIME_ERROR) ? TRI_YES : TRI_NO;
    f->maxerror_us = tx->maxerror;
    f->esterror_us = tx->esterror;
    f->offset_ns = (double)tx->offset * ((tx->status & STA_NANO) ? 1.0 : 1000.0);
    f->freq_ppm = (double)tx->freq / 65536.0;
    f->tai_offset_s = tx->tai;
    f->leap_pending = (tx->status & STA_INS) || state == TIME_INS ? 1
                      : (tx->status & STA_DEL) || state == TIME_DEL ? -1
                                                                    : 0;
}

void probe_live(struct doctor_facts *f)
{
    f->live = 1;
    struct utsname u;
    if (uname(&u) == 0) {
        copy_str(f->arch, sizeof f->arch, u.machine);
        if (f->kernel_err) {
            copy_str(f->kernel_release, sizeof f->kernel_release, u.release);
            f->kernel_err = 0;
        }
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    f->cpus = n > 0 ? (int)n : f->cpuinfo.processors;

    struct fc_cpu_info cpu;
    fc_cpu_probe(&cpu);
    f->has_cpuid = cpu.has_cpuid;
#if defined(__x86_64__) || defined(__i386__)
    if (cpu.has_cpuid) {
        copy_str(f->vendor, sizeof f->vendor, cpu.vendor);
        copy_str(f->model, sizeof f->model, cpu.brand[0] ? cpu.brand : f->cpuinfo.model_name);
        f->family = cpu.family;
        f->model_number = cpu.model;
        f->invariant_tsc = cpu.invariant_tsc ? TRI_YES : TRI_NO;
        copy_str(f->invariant_source, sizeof f->invariant_source, "CPUID 0x80000007 EDX[8]");
        f->has_rdtscp = cpu.has_rdtscp ? TRI_YES : TRI_NO;
        f->hypervisor = cpu.hypervisor ? TRI_YES : TRI_NO;
        copy_str(f->hv_signature, sizeof f->hv_signature, cpu.hypervisor_sig);
        f->hv_max_leaf = cpu.hypervisor_max_leaf;
        const char *hv = fc_hypervisor_name(cpu.hypervisor_sig);
        copy_str(f->hv_name, sizeof f->hv_name, hv ? hv : (cpu.hypervisor ? "unrecognised" : ""));
    }
#else
    copy_str(f->vendor, sizeof f->vendor, cpu.vendor);
    copy_str(f->model, sizeof f->model, f->cpuinfo.model_name);
    if (cpu.invariant_tsc) {
        f->invariant_tsc = TRI_YES;
        copy_str(f->invariant_source, sizeof f->invariant_source, "architecture (generic timer)");
    }
#endif
    f->cpuid_tsc_hz = cpu.tsc_hz;
    copy_str(f->cpuid_tsc_source, sizeof f->cpuid_tsc_source, cpu.tsc_hz_source);

    f->vdso_present = getauxval(AT_SYSINFO_EHDR) ? TRI_YES : TRI_NO;

    struct timex tx;
    memset(&tx, 0, sizeof tx);
    int state = adjtimex(&tx); /* modes 0: read only, allowed for everyone */
    if (state < 0)
        snprintf(f->sync_err, sizeof f->sync_err, "adjtimex: %s", fc_errno_text(errno));
    else
        facts_set_adjtimex(f, &tx, state);

    char *log = klog_read_live(&f->klog_err, f->klog_source, sizeof f->klog_source);
    if (log) {
        klog_parse(log, &f->klog);
        f->klog_readable = 1;
        free(log);
    }
}

void facts_choose_frequency(struct doctor_facts *f)
{
    /* Exact sources first: the crystal ratio (0x15) and the hypervisor's
     * leaf state the TSC's rate; the kernel's refined calibration measures
     * it; 0x16 and "MHz processor" give the CPU's base frequency, which on
     * some parts (Skylake-SP: 2500 against 2494.14 MHz) is not the TSC's. */
    int cpuid_exact = f->cpuid_tsc_hz > 0 && !strstr(f->cpuid_tsc_source, "0x16");
    f->tsc_hz = 0;
    f->tsc_hz_source[0] = 0;
#define PICK(hz, src) (f->tsc_hz = (hz), copy_str(f->tsc_hz_source, sizeof f->tsc_hz_source, (src)))
    if (cpuid_exact)
        PICK(f->cpuid_tsc_hz, f->cpuid_tsc_source);
    else if (f->klog.refined_hz > 0)
        PICK(f->klog.refined_hz, "kernel log, refined calibration");
    else if (f->klog.detected_hz > 0 && f->klog.detected_is_tsc)
        PICK(f->klog.detected_hz, "kernel log, TSC frequency");
    else if (f->cpuid_tsc_hz > 0)
        PICK(f->cpuid_tsc_hz, f->cpuid_tsc_source);
    else if (f->klog.detected_hz > 0)
        PICK(f->klog.detected_hz, "kernel log, detected at boot");
    else if (f->klog.counter_hz > 0)
        PICK(f->klog.counter_hz, "kernel log, arch_timer");
    else if (f->measured_tsc_hz > 0)
        PICK(f->measured_tsc_hz, "measured against CLOCK_MONOTONIC_RAW");
#undef PICK
}
