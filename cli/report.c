#define _GNU_SOURCE
#include "report.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/timex.h>

#include "fastclock.h"
#include "json.h"
#include "kernel.h"
#include "sysparse.h"

#define WIDTH 100

/* ---- shared wording ------------------------------------------------------ */

static const char *tri_word(int v) { return v < 0 ? "unknown" : v ? "yes" : "no"; }

static const char *cs_meaning(enum vdso_cap c)
{
    switch (c) {
    case VDSO_CAP_YES: return "the vDSO reads it without a system call";
    case VDSO_CAP_IF_STABLE: return "the vDSO reads it only if the hypervisor marks it stable";
    case VDSO_CAP_NO: return "every read is a system call";
    default: return "unknown to the doctor";
    }
}

void report_verdict(const struct doctor_facts *f, const struct findings *fs, char *summary, size_t size)
{
    enum severity worst = findings_worst(fs);
    const struct finding *gain = findings_get(fs, "fastclock-gain");
    if (worst >= SEV_WARNING) {
        /* The first clause of the most important finding (up to a colon
         * or semicolon outside parentheses). */
        char first[256];
        copy_str(first, sizeof first, fs->f[0].message);
        int depth = 0;
        for (char *p = first; *p; p++) {
            depth += (*p == '(') - (*p == ')');
            if (depth == 0 && (*p == ':' || *p == ';')) {
                *p = 0;
                break;
            }
        }
        int more = 0;
        for (int i = 1; i < fs->n; i++)
            more += fs->f[i].severity >= SEV_WARNING;
        struct sbuf b;
        sb_init(&b, summary, size);
        sb_printf(&b, "%s", first);
        if (more)
            sb_printf(&b, " (and %d more finding%s to look at)", more, more == 1 ? "" : "s");
        return;
    }
    static const char *const unknowns[] = {"clocksource-unknown", "kernel-log-unreadable", "seccomp-unavailable"};
    for (unsigned i = 0; i < sizeof unknowns / sizeof unknowns[0]; i++)
        if (findings_get(fs, unknowns[i])) {
            snprintf(summary, size, "no problem found, but some facts are unknown here (see the info findings)");
            return;
        }
    /* As the finding says: `fastclock run` where clock_gettime through it
     * gains (fastclock_gettime), else linking where fastclock_mono_ns does. */
    double run = findings_run_gain(f), link = findings_link_gain(f);
    if (gain && gain->severity == SEV_OK && !isnan(run) && run >= FINDINGS_GAIN_RATIO)
        snprintf(summary, size, "this machine's time is fine; fastclock gives a further %.1fx "
                                "(`fastclock run -- your-program`)",
                 run);
    else if (gain && gain->severity == SEV_OK && !isnan(link) && link >= FINDINGS_GAIN_RATIO)
        snprintf(summary, size, "this machine's time is fine; fastclock_mono_ns() gives a further %.1fx "
                                "(link libfastclock)",
                 link);
    else
        snprintf(summary, size, "this machine's time is fine");
}

/* ---- text ---------------------------------------------------------------- */

struct style {
    const char *bold, *dim, *off;
    const char *sev[4];
};

static void wrap(FILE *out, int indent, int first_used, const char *text)
{
    int col = first_used, first = 1;
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        const char *w = p;
        while (*p && *p != ' ')
            p++;
        /* Never break inside a `command`: it is meant to be copied. */
        int ticks = 0;
        for (const char *q = w; q < p; q++)
            ticks += *q == '`';
        if (ticks % 2 && strchr(p, '`'))
            p = strchr(p, '`') + 1;
        while (*p && *p != ' ')
            p++;
        int len = (int)(p - w);
        if (!len)
            break;
        if (!first && col + 1 + len > WIDTH) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
        } else if (!first) {
            fputc(' ', out);
            col++;
        }
        first = 0;
        /* The text carries bytes from the machine (DMI strings, the
         * hypervisor's signature, kernel log lines): no control byte
         * reaches the terminal. */
        for (const char *c = w; c < w + len; c++)
            fputc((unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c, out);
        col += len;
    }
    fputc('\n', out);
}

/* "  label            value..." with the value wrapped under itself. */
static void row(FILE *out, const char *label, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void row(FILE *out, const char *label, const char *fmt, ...)
{
    char text[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(out, "  %-17s", label);
    wrap(out, 19, 19, text);
}

static void section(FILE *out, const struct style *s, const char *title)
{
    fprintf(out, "\n%s%s%s\n", s->bold, title, s->off);
}

static void fmt_ns(char *buf, size_t size, double ns)
{
    if (isnan(ns))
        copy_str(buf, size, "-");
    else
        format_ns(buf, size, ns);
}

static void text_machine(FILE *out, const struct doctor_facts *f, const struct style *s)
{
    section(out, s, "Machine");
    char cpu[256];
    struct sbuf b;
    sb_init(&b, cpu, sizeof cpu);
    sb_printf(&b, "%s", f->model[0] ? f->model : "unknown model");
    if (f->vendor[0])
        sb_printf(&b, " (%s", f->vendor);
    if (f->has_cpuid)
        sb_printf(&b, ", family 0x%x model 0x%x", f->family, f->model_number);
    if (f->vendor[0])
        sb_printf(&b, ")");
    sb_printf(&b, "; %d CPU%s, %s", f->cpus, f->cpus == 1 ? "" : "s", f->arch[0] ? f->arch : "unknown arch");
    row(out, "CPU", "%s", cpu);
    if (f->hypervisor == TRI_YES)
        row(out, "hypervisor", "%s (CPUID signature \"%s\", max leaf 0x%x)", f->hv_name[0] ? f->hv_name : "unknown",
            f->hv_signature, f->hv_max_leaf);
    else if (f->hypervisor == TRI_NO)
        row(out, "hypervisor", "none (bare metal)");
    else
        row(out, "hypervisor", "unknown (%s)", f->has_cpuid || !f->arch[0] ? "not reported" : "no CPUID on this architecture");
    if (f->cloud[0])
        row(out, "cloud", "%s (DMI %s)", f->cloud, f->cloud_evidence);
    else if (f->dmi.err)
        row(out, "cloud", "unknown (/sys/class/dmi/id: %s)", fc_errno_text(f->dmi.err));
    else
        row(out, "cloud", "none recognised (DMI vendor \"%s\", product \"%s\")", f->dmi.sys_vendor, f->dmi.product_name);
    if (f->kernel_err)
        row(out, "kernel", "unknown (%s)", fc_errno_text(f->kernel_err));
    else
        row(out, "kernel", "Linux %s", f->kernel_release);
    if (!f->live)
        row(out, "source", "capture %s (nothing measured live)", f->root);
}

static void text_tsc(FILE *out, const struct doctor_facts *f, const struct style *s)
{
    int arm = strcmp(f->arch, "aarch64") == 0 || strcmp(f->arch, "arm64") == 0;
    section(out, s, arm ? "Counter (generic timer, cntvct_el0)" : "Counter (TSC)");
    if (f->invariant_tsc == TRI_UNKNOWN)
        row(out, "invariant", "unknown");
    else
        row(out, "invariant", "%s (%s)", tri_word(f->invariant_tsc), f->invariant_source);
    if (f->cpuinfo_err)
        row(out, "flags", "unknown (/proc/cpuinfo: %s)", fc_errno_text(f->cpuinfo_err));
    else if (f->cpuinfo.is_arm)
        row(out, "flags", "not applicable (arm64 generic timer)");
    else {
        char flags[256];
        struct sbuf b;
        sb_init(&b, flags, sizeof flags);
        for (int i = 0; i < 6; i++)
            sb_printf(&b, "%s%s%s", i ? "  " : "", f->flag[i] == TRI_YES ? "+" : "-", tsc_flag_names[i]);
        row(out, "flags", "%s", flags);
    }
    char freq[256];
    struct sbuf b;
    sb_init(&b, freq, sizeof freq);
    if (f->tsc_hz > 0)
        sb_printf(&b, "%.3f MHz (%s)", f->tsc_hz / 1e6, f->tsc_hz_source);
    else
        sb_printf(&b, "unknown");
    if (f->measured_tsc_hz > 0 && strncmp(f->tsc_hz_source, "measured", 8) != 0) {
        sb_printf(&b, "; measured %.3f MHz against CLOCK_MONOTONIC_RAW", f->measured_tsc_hz / 1e6);
        if (f->tsc_hz > 0)
            sb_printf(&b, " (%+.0f ppm)", (f->measured_tsc_hz - f->tsc_hz) / f->tsc_hz * 1e6);
    } else if (f->measured_tsc_hz <= 0 && f->measured_err[0]) {
        sb_printf(&b, "; measured: %s", f->measured_err);
    }
    row(out, "frequency", "%s", freq);
    if (f->warp_ran) {
        char skipped[160] = "";
        if (f->warp_pairs_skipped > 0 && !warp_found(f)) /* fc_warp_verdict: no verdict */
            snprintf(skipped, sizeof skipped, ": none seen, but %d pair%s could not be compared (%s)",
                     f->warp_pairs_skipped, f->warp_pairs_skipped == 1 ? "" : "s", warp_skip_why(f));
        row(out, "cross-CPU warp", "%lld cycles over %d CPU pair%s (%.1f M %s reads taken in turn)%s",
            (long long)f->warp_max_cycles, f->warp_pairs, f->warp_pairs == 1 ? "" : "s",
            (double)f->warp_iterations / 1e6, f->warp_insn[0] ? f->warp_insn : "ordered",
            warp_found(f)             ? (arm ? ": the CPUs' counters disagree" : ": the TSCs disagree")
            : skipped[0]              ? skipped
            : f->warp_max_cycles > 0 ? ": under a nanosecond, in step (per-vCPU offsets)"
                                      : ": in step");
    } else
        row(out, "cross-CPU warp", "unknown (%s)", f->warp_err);
}

static void text_kernel(FILE *out, const struct doctor_facts *f, const struct style *s)
{
    section(out, s, "Clocksource and kernel");
    if (f->cs_current_err)
        row(out, "current", "unknown (%s)", fc_errno_text(f->cs_current_err));
    else
        row(out, "current", "%s: %s", f->cs_current, cs_meaning(f->cs_vdso));
    if (f->cs_available_err)
        row(out, "available", "unknown (%s)", fc_errno_text(f->cs_available_err));
    else
        row(out, "available", "%s", f->cs_available);
    if (f->cmdline_err)
        row(out, "command line", "unknown (/proc/cmdline: %s)", fc_errno_text(f->cmdline_err));
    else if (!f->p_clocksource[0] && !f->p_tsc[0] && !f->p_notsc && !f->p_vdso_off)
        row(out, "command line", "no clocksource=, tsc=, notsc or vdso= parameters");
    else
        row(out, "command line", "%s%s%s%s%s%s%s", f->p_clocksource[0] ? "clocksource=" : "", f->p_clocksource,
            f->p_clocksource[0] ? " " : "", f->p_tsc[0] ? "tsc=" : "", f->p_tsc, f->p_notsc ? " notsc" : "",
            f->p_vdso_off ? " vdso=0" : "");
    if (f->vdso_present == TRI_UNKNOWN)
        row(out, "vDSO", "unknown");
    else
        row(out, "vDSO", "%s", f->vdso_present ? "mapped (AT_SYSINFO_EHDR)" : "absent: every clock call is a system call");

    if (!f->klog_readable) {
        row(out, "kernel log", "unknown (%s: %s)", f->klog_source[0] ? f->klog_source : "/dev/kmsg",
            fc_errno_text(f->klog_err));
        return;
    }
    const struct klog *k = &f->klog;
    char summary[512];
    struct sbuf b;
    sb_init(&b, summary, sizeof summary);
    sb_printf(&b, "%s, %d records", f->klog_source, k->records);
    if (k->first_s > 1)
        sb_printf(&b, " (from %.0f s after boot: earlier ones rotated out)", k->first_s);
    sb_printf(&b, "; ");
    if (k->last_switch[0])
        sb_printf(&b, "last switch to %s", k->last_switch);
    else
        sb_printf(&b, "no clocksource switch logged");
    if (strcmp(f->arch, "aarch64") == 0 || strcmp(f->arch, "arm64") == 0)
        sb_printf(&b, "; %s", k->timer_erratum ? "a timer erratum WORKED AROUND (counter reads trapped)"
                                               : "no timer erratum worked around");
    else
        sb_printf(&b, "; TSC %s", k->tsc_unstable || k->watchdog_tsc ? "MARKED UNSTABLE"
                                  : k->first_s > 1                  ? "not marked unstable in the records kept"
                                                                    : "never marked unstable");
    row(out, "kernel log", "%s", summary);
    for (int i = 0; i < k->nevents; i++) {
        char line[400];
        if (k->ev[i].time_s >= 0)
            snprintf(line, sizeof line, "[%10.6f] %s", k->ev[i].time_s, k->ev[i].text);
        else
            snprintf(line, sizeof line, "%s", k->ev[i].text);
        row(out, "", "%s", line);
    }
    if (k->dropped)
        row(out, "", "... and %d more events", k->dropped);
}

static void text_clocks(FILE *out, const struct doctor_facts *f, const struct style *s)
{
    section(out, s, "Clocks");
    fprintf(out, "  %-26s %10s %10s  %-8s %11s %13s\n", "", "libc", "syscall", "kernel?", "resolution", "observed step");
    for (int i = 0; i < FACT_NCALLS; i++) {
        const struct clock_fact *c = &f->call[i];
        char libc[24], sys[24], res[24], step[24];
        if (c->supported == TRI_NO) {
            if (c->err)
                fprintf(out, "  %-26s unsupported here (%s)\n", c->name, strerror(c->err));
            else /* a capture (--root) says unsupported, not why */
                fprintf(out, "  %-26s unsupported in the capture\n", c->name);
            continue;
        }
        fmt_ns(libc, sizeof libc, c->libc_ns);
        fmt_ns(sys, sizeof sys, c->syscall_ns);
        fmt_ns(res, sizeof res, c->res_ns);
        fmt_ns(step, sizeof step, c->step_ns);
        const char *k = c->enters_kernel == TRI_YES ? "YES" : c->enters_kernel == TRI_NO ? "no" : "?";
        fprintf(out, "  %-26s %10s %10s  %-8s %11s %13s\n", c->name, libc, sys, k, res, step);
    }
    if (f->seccomp_ok == TRI_YES)
        fprintf(out, "  %skernel?: does libc's call make the system call (seccomp check in a child process)%s\n",
                s->dim, s->off);
    else
        fprintf(out, "  %skernel?: unknown where shown '?': %s%s\n", s->dim, f->seccomp_err, s->off);
}

static void text_sync(FILE *out, const struct doctor_facts *f, const struct style *s)
{
    section(out, s, "Synchronisation");
    if (!f->sync_known) {
        row(out, "state", "unknown (%s)", f->sync_err);
    } else {
        char maxe[32], este[32];
        format_ns(maxe, sizeof maxe, (double)f->maxerror_us * 1e3);
        format_ns(este, sizeof este, (double)f->esterror_us * 1e3);
        row(out, "state", "%s; maxerror %s, esterror %s",
            f->synchronized == TRI_YES ? "synchronised" : f->sync_state == TIME_ERROR ? "not synchronised (TIME_ERROR)"
                                                                                       : "not synchronised (STA_UNSYNC)",
            maxe, este);
        row(out, "discipline", "offset %.0f ns, frequency %+.3f ppm, TAI offset %d s, leap second: %s", f->offset_ns,
            f->freq_ppm, f->tai_offset_s, f->leap_pending > 0 ? "insert pending" : f->leap_pending < 0 ? "delete pending" : "none");
    }
    if (!f->daemons_scanned)
        row(out, "daemons", "unknown (%s)", f->daemons_err);
    else
        row(out, "daemons", "%s", f->daemons[0] ? f->daemons : "none running (chronyd, ntpd, systemd-timesyncd, ptp4l)");
}

/* The counter's rate, where the library has one: in mode system the status
 * gives fastclock_ticks()' unit (1e9: ns), and before the first line 0. */
static double counter_rate(const struct doctor_facts *f)
{
    int counted = f->fc_known && (strcmp(f->fc_mode, "tsc") == 0 || strcmp(f->fc_mode, "tsc-percpu") == 0);
    return counted && !isnan(f->fc_counter_hz) && f->fc_counter_hz > 0 ? f->fc_counter_hz : NAN;
}

static void text_fastclock(FILE *out, const struct doctor_facts *f, const struct style *s)
{
    section(out, s, "fastclock");
    if (!f->fc_known) {
        row(out, "mode", "unknown (%s)", f->live ? "status unavailable" : "not in the capture");
        return;
    }
    char bound[64] = "";
    if (f->fc_error_bound_ns >= 0)
        snprintf(bound, sizeof bound, ", error bound %lld ns", (long long)f->fc_error_bound_ns);
    if (!isnan(counter_rate(f)))
        row(out, "mode", "%s%s (%s calibrator, counter %s at %.3f MHz%s)", f->fc_mode,
            f->fc_forced ? ", forced by FASTCLOCK_MODE" : "", f->fc_calibrator, f->fc_counter, counter_rate(f) / 1e6,
            bound);
    else
        row(out, "mode", "%s%s (%s calibrator%s)", f->fc_mode, f->fc_forced ? ", forced by FASTCLOCK_MODE" : "",
            f->fc_calibrator, bound);
    row(out, "reason", "%s", f->fc_reason);
    char a[24], b[24], c[24];
    fmt_ns(a, sizeof a, f->fc_ns);
    fmt_ns(b, sizeof b, f->fc_unordered_ns);
    fmt_ns(c, sizeof c, f->fc_coarse_ns);
    if (strcmp(f->arch, "aarch64") == 0 || strcmp(f->arch, "arm64") == 0) {
        row(out, "ordered read", "fastclock_mono_ns %s: the counter is read after every earlier instruction and "
                                 "before every later load (isb;cntvct_el0 or cntvctss_el0, then an address "
                                 "dependency, as the kernel's vDSO does), so a read that follows another thread's "
                                 "read never goes back",
            a);
        row(out, "unordered read", "fastclock_mono_ns_unordered %s: bare mrs cntvct_el0, which arm64 may execute "
                                   "early or late (it is not a memory access); for intervals measured by one thread",
            b);
    } else {
        /* Name the fenced read this process chose (status().counter), not a fixed one. */
        const char *fenced = strcmp(f->fc_counter, "rdtscp") == 0 || strcmp(f->fc_counter, "lfence;rdtsc") == 0
                                 ? f->fc_counter
                                 : "the kernel's own ordered read";
        row(out, "ordered read", "fastclock_mono_ns %s: the counter is read after every earlier instruction "
                                 "(%s), so a read that follows another thread's read never goes back",
            a, fenced);
        row(out, "unordered read", "fastclock_mono_ns_unordered %s: bare rdtsc, monotonic within one thread only "
                                   "(the CPU may read the counter early); for intervals measured by one thread",
            b);
    }
    row(out, "coarse read", "fastclock_mono_coarse_ns %s: about 1 ms resolution", c);
}

static void text_findings(FILE *out, const struct findings *fs, const struct style *s)
{
    section(out, s, "Findings (most important first)");
    if (!fs->n)
        fprintf(out, "  none\n");
    for (int i = 0; i < fs->n; i++) {
        const struct finding *x = &fs->f[i];
        char label[16];
        snprintf(label, sizeof label, "%s", severity_name(x->severity));
        for (char *p = label; *p; p++)
            *p = (char)(*p - 32 * (*p >= 'a' && *p <= 'z'));
        fprintf(out, "  %s%-8s%s %s%s%s\n", s->sev[x->severity], label, s->off, s->bold, x->id, s->off);
        fprintf(out, "%11s", "");
        wrap(out, 11, 11, x->message);
        if (x->fix[0]) {
            fprintf(out, "%11s%sfix:%s ", "", s->bold, s->off);
            wrap(out, 16, 16, x->fix);
        }
    }
}

void report_text(FILE *out, const struct doctor_facts *f, const struct findings *fs, int colour)
{
    struct style s = {"", "", "", {"", "", "", ""}};
    if (colour) {
        s.bold = "\033[1m";
        s.dim = "\033[2m";
        s.off = "\033[0m";
        s.sev[SEV_OK] = "\033[1;32m";
        s.sev[SEV_INFO] = "\033[1;36m";
        s.sev[SEV_WARNING] = "\033[1;33m";
        s.sev[SEV_PROBLEM] = "\033[1;31m";
    }
    enum severity worst = findings_worst(fs);
    char summary[512];
    report_verdict(f, fs, summary, sizeof summary);
    static const char *const word[] = {"OK", "OK", "WARNING", "PROBLEM"};
    fprintf(out, "fastclock doctor %s%s\n", fastclock_version(), f->quick ? " (--quick)" : "");
    fprintf(out, "%sverdict: %s%s - ", s.sev[worst == SEV_INFO ? SEV_OK : worst], word[worst], s.off);
    wrap(out, 2, 9 + (int)strlen(word[worst]) + 3, summary);

    text_machine(out, f, &s);
    text_tsc(out, f, &s);
    text_kernel(out, f, &s);
    text_clocks(out, f, &s);
    text_sync(out, f, &s);
    text_fastclock(out, f, &s);
    text_findings(out, fs, &s);
    fprintf(out, "\n%sfinished in %.1f s%s\n", s.dim, f->elapsed_s, s.off);
    fflush(out);
}

/* ---- JSON ---------------------------------------------------------------- */

static void json_str_or_null(struct json *j, const char *key, const char *v, int known)
{
    json_string(j, key, known && v && *v ? v : NULL);
}

/* A space-separated list as an array of strings. */
static void json_words(struct json *j, const char *key, const char *list)
{
    char buf[1024];
    copy_str(buf, sizeof buf, list);
    json_begin_array(j, key);
    for (char *save, *w = strtok_r(buf, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save))
        json_string(j, NULL, w);
    json_end_array(j);
}

static void json_err(struct json *j, const char *key, int err)
{
    json_string(j, key, err ? fc_errno_text(err) : NULL);
}

void report_json(FILE *out, const struct doctor_facts *f, const struct findings *fs)
{
    struct json j;
    json_init(&j, out);
    json_begin_object(&j, NULL);
    json_int(&j, "schema_version", DOCTOR_SCHEMA_VERSION);
    json_string(&j, "fastclock_version", fastclock_version());
    json_string(&j, "source", f->live ? "live" : "capture");
    json_bool(&j, "quick", f->quick);
    json_double(&j, "elapsed_s", f->elapsed_s, 3);

    char summary[512];
    report_verdict(f, fs, summary, sizeof summary);
    json_begin_object(&j, "verdict");
    enum severity worst = findings_worst(fs);
    json_string(&j, "severity", severity_name(worst));
    json_string(&j, "summary", summary);
    json_int(&j, "exit_status", worst == SEV_PROBLEM ? 1 : 0);
    json_end_object(&j);

    json_begin_object(&j, "system");
    json_str_or_null(&j, "arch", f->arch, 1);
    json_str_or_null(&j, "kernel", f->kernel_release, !f->kernel_err);
    json_err(&j, "kernel_error", f->kernel_err);
    json_int(&j, "cpus", f->cpus);
    json_end_object(&j);

    json_begin_object(&j, "cpu");
    json_str_or_null(&j, "vendor", f->vendor, 1);
    json_str_or_null(&j, "model", f->model, 1);
    if (f->has_cpuid) {
        json_int(&j, "family", f->family);
        json_int(&j, "model_number", f->model_number);
    } else {
        json_null(&j, "family");
        json_null(&j, "model_number");
    }
    json_err(&j, "cpuinfo_error", f->cpuinfo_err);
    json_end_object(&j);

    json_begin_object(&j, "hypervisor");
    json_tri(&j, "present", f->hypervisor);
    json_str_or_null(&j, "signature", f->hv_signature, 1);
    json_str_or_null(&j, "name", f->hv_name, 1);
    if (f->hypervisor == TRI_YES) {
        char leaf[16];
        snprintf(leaf, sizeof leaf, "0x%x", f->hv_max_leaf);
        json_string(&j, "max_leaf", leaf);
    } else {
        json_null(&j, "max_leaf");
    }
    json_str_or_null(&j, "cloud", f->cloud, 1);
    json_str_or_null(&j, "cloud_evidence", f->cloud_evidence, 1);
    json_err(&j, "dmi_error", f->dmi.err);
    json_end_object(&j);

    json_begin_object(&j, "tsc");
    json_tri(&j, "invariant", f->invariant_tsc);
    json_str_or_null(&j, "invariant_source", f->invariant_source, 1);
    json_begin_object(&j, "flags");
    for (int i = 0; i < 6; i++)
        json_tri(&j, tsc_flag_names[i], f->flag[i]);
    json_end_object(&j);
    if (f->tsc_hz > 0)
        json_double(&j, "frequency_hz", f->tsc_hz, 0);
    else
        json_null(&j, "frequency_hz");
    json_str_or_null(&j, "frequency_source", f->tsc_hz_source, f->tsc_hz > 0);
    if (f->measured_tsc_hz > 0)
        json_double(&j, "measured_hz", f->measured_tsc_hz, 0);
    else
        json_null(&j, "measured_hz");
    if (f->measured_tsc_hz > 0 && f->tsc_hz > 0)
        json_double(&j, "measured_ppm", (f->measured_tsc_hz - f->tsc_hz) / f->tsc_hz * 1e6, 1);
    else
        json_null(&j, "measured_ppm");
    if (f->warp_ran)
        json_int(&j, "max_warp_cycles", f->warp_max_cycles);
    else
        json_null(&j, "max_warp_cycles");
    json_begin_object(&j, "warp");
    json_bool(&j, "measured", f->warp_ran);
    json_string(&j, "error", f->warp_ran ? NULL : f->warp_err);
    json_int(&j, "pairs", f->warp_pairs);
    json_int(&j, "pairs_skipped", f->warp_pairs_skipped);
    json_uint(&j, "iterations", f->warp_iterations);
    json_uint(&j, "backward_steps", f->warp_count);
    json_int(&j, "pairs_unpinned", f->warp_pairs_unpinned);
    json_str_or_null(&j, "read", f->warp_insn, f->warp_insn[0] != 0);
    json_end_object(&j);
    json_end_object(&j);

    json_begin_object(&j, "clocksource");
    json_str_or_null(&j, "current", f->cs_current, !f->cs_current_err);
    json_err(&j, "current_error", f->cs_current_err);
    if (f->cs_available_err)
        json_null(&j, "available");
    else
        json_words(&j, "available", f->cs_available);
    json_err(&j, "available_error", f->cs_available_err);
    json_string(&j, "vdso_capable", vdso_cap_name(f->cs_vdso));
    json_end_object(&j);

    json_begin_object(&j, "kernel");
    json_begin_object(&j, "cmdline");
    json_bool(&j, "readable", !f->cmdline_err);
    json_err(&j, "error", f->cmdline_err);
    json_str_or_null(&j, "clocksource", f->p_clocksource, 1);
    json_str_or_null(&j, "tsc", f->p_tsc, 1);
    /* Unknown facts are null (docs/cli.md), not false. */
    json_tri(&j, "notsc", f->cmdline_err ? TRI_UNKNOWN : f->p_notsc ? TRI_YES : TRI_NO);
    json_tri(&j, "vdso_off", f->cmdline_err ? TRI_UNKNOWN : f->p_vdso_off ? TRI_YES : TRI_NO);
    json_end_object(&j);
    json_begin_object(&j, "log");
    json_bool(&j, "readable", f->klog_readable);
    json_string(&j, "error", f->klog_readable ? NULL : fc_errno_text(f->klog_err));
    json_str_or_null(&j, "source", f->klog_source, 1);
    if (f->klog_readable)
        json_int(&j, "records", f->klog.records);
    else
        json_null(&j, "records");
    json_str_or_null(&j, "last_switch", f->klog.last_switch, 1);
    /* Records rotated out of the ring buffer (the oldest kept is past the
     * first second) may have said either: unknown, not no. */
    int rotated = f->klog.first_s > 1;
    json_tri(&j, "tsc_marked_unstable",
             !f->klog_readable                            ? TRI_UNKNOWN
             : f->klog.tsc_unstable || f->klog.watchdog_tsc ? TRI_YES
             : rotated                                     ? TRI_UNKNOWN
                                                           : TRI_NO);
    json_str_or_null(&j, "tsc_unstable_reason", f->klog.tsc_unstable_reason, 1);
    if (f->klog_readable && (f->klog.warp_cycles > 0 || !rotated))
        json_int(&j, "boot_warp_cycles", f->klog.warp_cycles);
    else
        json_null(&j, "boot_warp_cycles");
    json_begin_array(&j, "events");
    for (int i = 0; i < f->klog.nevents; i++) {
        const struct klog_event *e = &f->klog.ev[i];
        json_begin_object(&j, NULL);
        json_string(&j, "kind", klog_kind_name(e->kind));
        if (e->time_s >= 0)
            json_double(&j, "time_s", e->time_s, 6);
        else
            json_null(&j, "time_s");
        json_string(&j, "text", e->text);
        json_end_object(&j);
    }
    json_end_array(&j);
    json_end_object(&j);
    json_end_object(&j);

    json_begin_object(&j, "vdso");
    json_tri(&j, "present", f->vdso_present);
    json_tri(&j, "seccomp_verdict", f->seccomp_ok);
    json_string(&j, "seccomp_error", f->seccomp_ok == TRI_YES ? NULL : f->seccomp_err);
    json_begin_object(&j, "clocks");
    for (int i = 0; i < FACT_NCALLS; i++) {
        const struct clock_fact *c = &f->call[i];
        json_begin_object(&j, c->name);
        if (c->id >= 0)
            json_int(&j, "id", c->id);
        else
            json_null(&j, "id");
        json_tri(&j, "supported", c->supported);
        json_string(&j, "error", c->supported != TRI_NO ? NULL
                                 : c->err        ? strerror(c->err)
                                                 : "unsupported in the capture");
        json_double(&j, "libc_ns", c->libc_ns, 2);
        json_double(&j, "syscall_ns", c->syscall_ns, 2);
        json_tri(&j, "enters_kernel", c->enters_kernel);
        json_string(&j, "verdict", c->verdict);
        json_double(&j, "resolution_ns", c->res_ns, 0);
        json_double(&j, "observed_step_ns", c->step_ns, 1);
        json_end_object(&j);
    }
    json_end_object(&j);
    json_end_object(&j);

    json_begin_object(&j, "sync");
    json_bool(&j, "known", f->sync_known);
    json_string(&j, "error", f->sync_known ? NULL : f->sync_err);
    json_tri(&j, "synchronized", f->synchronized);
    if (f->sync_known) {
        static const char *const states[] = {"TIME_OK", "TIME_INS", "TIME_DEL", "TIME_OOP", "TIME_WAIT", "TIME_ERROR"};
        json_string(&j, "state", f->sync_state >= 0 && f->sync_state <= 5 ? states[f->sync_state] : "unknown");
        json_int(&j, "status", f->sync_status);
        json_int(&j, "maxerror_us", f->maxerror_us);
        json_int(&j, "esterror_us", f->esterror_us);
        json_double(&j, "offset_ns", f->offset_ns, 0);
        json_double(&j, "frequency_ppm", f->freq_ppm, 3);
        json_int(&j, "tai_offset_s", f->tai_offset_s);
        json_string(&j, "leap_pending", f->leap_pending > 0 ? "insert" : f->leap_pending < 0 ? "delete" : "none");
    } else {
        const char *keys[] = {"state", "status", "maxerror_us", "esterror_us", "offset_ns", "frequency_ppm",
                              "tai_offset_s", "leap_pending"};
        for (unsigned i = 0; i < sizeof keys / sizeof keys[0]; i++)
            json_null(&j, keys[i]);
    }
    if (f->daemons_scanned)
        json_words(&j, "daemons", f->daemons);
    else
        json_null(&j, "daemons");
    json_string(&j, "daemons_error", f->daemons_scanned ? NULL : f->daemons_err);
    json_end_object(&j);

    json_begin_object(&j, "fastclock");
    json_str_or_null(&j, "mode", f->fc_mode, f->fc_known);
    json_str_or_null(&j, "reason", f->fc_reason, f->fc_known);
    if (f->fc_known)
        json_bool(&j, "forced", f->fc_forced);
    else
        json_null(&j, "forced");
    json_str_or_null(&j, "calibrator", f->fc_calibrator, f->fc_known);
    json_str_or_null(&j, "counter", f->fc_counter, f->fc_known);
    json_double(&j, "counter_hz", counter_rate(f), 0);
    if (f->fc_known && f->fc_error_bound_ns >= 0)
        json_int(&j, "error_bound_ns", f->fc_error_bound_ns);
    else
        json_null(&j, "error_bound_ns");
    json_double(&j, "ns_per_call", f->fc_ns, 2);
    json_double(&j, "ns_per_call_unordered", f->fc_unordered_ns, 2);
    json_double(&j, "ns_per_call_coarse", f->fc_coarse_ns, 2);
    json_double(&j, "ns_per_call_gettime", f->fc_gettime_ns, 2);
    double speedup = f->fc_ns > 0 ? f->call[1].libc_ns / f->fc_ns : NAN;
    json_double(&j, "speedup_vs_clock_gettime", speedup, 2);
    json_end_object(&j);

    json_begin_array(&j, "findings");
    for (int i = 0; i < fs->n; i++) {
        const struct finding *x = &fs->f[i];
        json_begin_object(&j, NULL);
        json_string(&j, "severity", severity_name(x->severity));
        json_string(&j, "id", x->id);
        json_string(&j, "message", x->message);
        json_string(&j, "fix", x->fix);
        json_end_object(&j);
    }
    json_end_array(&j);
    json_end_object(&j);
    json_finish(&j);
}
