/* Recommendations.  Every finding says what was found, what it means for a
 * program on this machine, and what to change -- with this machine's
 * numbers where they were measured. */
#define _GNU_SOURCE
#include "findings.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel.h"

#define SWITCH_NOW "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource"
/* What clock_gettime costs through the vDSO on a TSC clocksource: the
 * typical figure on current x86 servers (15-25 ns). */
#define VDSO_TSC_NS 20.0

const char *severity_name(enum severity s)
{
    switch (s) {
    case SEV_OK: return "ok";
    case SEV_INFO: return "info";
    case SEV_WARNING: return "warning";
    default: return "problem";
    }
}

static struct finding *add(struct findings *o, enum severity sev, double impact, const char *id)
{
    if (o->n >= MAX_FINDINGS)
        return NULL;
    struct finding *x = &o->f[o->n++];
    memset(x, 0, sizeof *x);
    x->severity = sev;
    x->impact = impact;
    copy_str(x->id, sizeof x->id, id);
    return x;
}

static void append(char *dst, size_t size, const char *fmt, va_list ap)
{
    size_t len = strlen(dst);
    if (len + 1 < size)
        vsnprintf(dst + len, size - len, fmt, ap);
}

__attribute__((format(printf, 2, 3))) static void msg(struct finding *x, const char *fmt, ...)
{
    if (!x)
        return;
    va_list ap;
    va_start(ap, fmt);
    append(x->message, sizeof x->message, fmt, ap);
    va_end(ap);
}

__attribute__((format(printf, 2, 3))) static void fix(struct finding *x, const char *fmt, ...)
{
    if (!x)
        return;
    va_list ap;
    va_start(ap, fmt);
    append(x->fix, sizeof x->fix, fmt, ap);
    va_end(ap);
}

/* Everything the rules share, computed once. */
struct ctx {
    const struct doctor_facts *f;
    int x86, arm;
    int tsc_available;     /* "tsc" among the available clocksources */
    int tsc_current;
    int tsc_usable;        /* available, and nothing here says it cannot be trusted (tsc_unusable) */
    char tsc_unusable[192];/* why switching to tsc is no remedy here, or "" */
    int list_unfiltered;   /* jiffies listed and tsc not current: being listed says nothing of trust */
    int enters;            /* tri: clock_gettime(CLOCK_MONOTONIC) makes a system call */
    int enters_inferred;   /* decided from timing or the clocksource's kind, not seccomp */
    double mono_ns;        /* libc clock_gettime(CLOCK_MONOTONIC), NaN if unknown */
    char mono_cost[32];
    char coarse_advice[320];
    int xen;
};

static int is_x86(const char *arch)
{
    return strcmp(arch, "x86_64") == 0 || strcmp(arch, "amd64") == 0 || (arch[0] == 'i' && strstr(arch, "86"));
}

static const char *or_unknown(const char *s) { return s && *s ? s : "unknown"; }

/*
 * Why switching the clocksource to tsc is no remedy here, as a clause for
 * the messages; empty when nothing says so.  Not only a missing or
 * non-invariant TSC: the kernel's own verdict (its log's "marked unstable",
 * `notsc` / `tsc=unstable`) and the warp measured here rule it out too --
 * a kernel with an unfiltered list (a periodic tick) still lists tsc then
 * and accepts the switch, and an admin who pinned hpet over a warping TSC
 * must not be told to undo it.
 */
static void tsc_unusable_why(struct ctx *c)
{
    const struct doctor_facts *f = c->f;
    char *w = c->tsc_unusable;
    size_t n = sizeof c->tsc_unusable;
    if (f->cs_available_err)
        snprintf(w, n, "the list of available clocksources is unreadable (%s)", fc_errno_text(f->cs_available_err));
    else if (!c->tsc_available)
        snprintf(w, n, "the kernel offers no tsc clocksource (available: %.120s)", or_unknown(f->cs_available));
    else if (f->invariant_tsc == TRI_NO)
        snprintf(w, n, "the CPU does not report an invariant TSC");
    else if (f->p_notsc || strstr(f->p_tsc, "unstable"))
        snprintf(w, n, "the kernel command line tells the kernel not to trust the TSC (`%s`)",
                 f->p_notsc ? "notsc" : "tsc=unstable");
    else if (f->klog.tsc_unstable || f->klog.watchdog_tsc)
        snprintf(w, n, "the kernel marked the TSC unstable (its log says so)");
    else if (warp_found(f))
        snprintf(w, n, "the CPUs' TSCs disagree by %lld cycles (the warp check here)", (long long)f->warp_max_cycles);
    else
        w[0] = 0;
}

static void setup(struct ctx *c, const struct doctor_facts *f)
{
    memset(c, 0, sizeof *c);
    c->f = f;
    c->x86 = is_x86(f->arch);
    c->arm = strcmp(f->arch, "aarch64") == 0 || strcmp(f->arch, "arm64") == 0;
    c->tsc_available = !f->cs_available_err && fc_word_in_list(f->cs_available, "tsc");
    c->tsc_current = !f->cs_current_err && strcmp(f->cs_current, "tsc") == 0;
    tsc_unusable_why(c);
    c->tsc_usable = c->tsc_unusable[0] == 0;
    /* The library's rule (src/kernel.h fc_clocksource_list_unfiltered). */
    c->list_unfiltered = !f->cs_available_err && !c->tsc_current && fc_clocksource_list_unfiltered(f->cs_available);
    c->xen = strcmp(f->hv_name, "Xen") == 0;

    const struct clock_fact *mono = &f->call[1];
    c->mono_ns = mono->libc_ns;
    c->enters = mono->enters_kernel;
    if (c->enters == TRI_UNKNOWN) {
        c->enters_inferred = 1;
        if (f->vdso_present == TRI_NO || f->cs_vdso == VDSO_CAP_NO)
            c->enters = TRI_YES;
        else if (!isnan(mono->libc_ns) && !isnan(mono->syscall_ns))
            /* A vDSO read costs a small fraction of a system call. */
            c->enters = mono->libc_ns > 0.6 * mono->syscall_ns ? TRI_YES : TRI_NO;
        else if (f->cs_vdso == VDSO_CAP_YES)
            c->enters = TRI_NO;
    }
    if (!isnan(c->mono_ns))
        snprintf(c->mono_cost, sizeof c->mono_cost, "%.0f ns", c->mono_ns);
    else
        copy_str(c->mono_cost, sizeof c->mono_cost, "a system call (typically 100-1000 ns)");

    const struct clock_fact *coarse = &f->call[6];
    char res[32] = "a few ms", cost[32] = "a few ns";
    if (!isnan(coarse->res_ns))
        format_ns(res, sizeof res, coarse->res_ns);
    if (!isnan(coarse->libc_ns))
        format_ns(cost, sizeof cost, coarse->libc_ns);
    snprintf(c->coarse_advice, sizeof c->coarse_advice,
             "Where millisecond precision is enough, read CLOCK_MONOTONIC_COARSE or CLOCK_REALTIME_COARSE: "
             "%s per call from the vDSO without a system call, in steps of %s.",
             cost, res);
}

/* ---- reading the clock costs a system call -------------------------------- */

static void rule_no_vdso(struct ctx *c, struct findings *o)
{
    const struct doctor_facts *f = c->f;
    if (f->vdso_present != TRI_NO)
        return;
    struct finding *x = add(o, SEV_PROBLEM, isnan(c->mono_ns) ? 500 : c->mono_ns, "no-vdso");
    msg(x, "no vDSO is mapped into this process (AT_SYSINFO_EHDR is absent): every clock_gettime() and "
           "gettimeofday() is a system call, %s each here.", c->mono_cost);
    if (f->p_vdso_off)
        fix(x, "Remove `vdso=0` from the kernel command line and reboot.");
    else
        fix(x, "Something hides the vDSO from this process (valgrind, a sandbox such as gVisor, an emulator, or "
               "a kernel built without it): run the program where the vDSO is available. Meanwhile read the "
               "clock less often, e.g. one timestamp per request or batch.");
}

static void switch_fix(struct ctx *c, struct finding *x)
{
    const struct doctor_facts *f = c->f;
    if (c->list_unfiltered)
        fix(x, "First make sure the kernel has not marked the TSC unstable (`journalctl -k -b | grep -i tsc`): "
               "jiffies is listed, so the tick is not in one-shot mode and the list holds every clocksource, "
               "tsc whether or not the kernel trusts it. ");
    fix(x, "Switch now with `" SWITCH_NOW "` (as root; takes effect at once), and persist it with "
           "`clocksource=tsc` on the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, then "
           "update-grub and reboot).");
    if (f->p_clocksource[0] && strcmp(f->p_clocksource, "tsc") != 0)
        fix(x, " The command line currently forces `clocksource=%s`: replace it.", f->p_clocksource);
    if (c->xen)
        fix(x, " Caveat on Xen: when the provider live-migrates this VM to a host with a different TSC "
               "frequency, the TSC changes rate unless Xen scales or emulates it; AWS recommends tsc on its "
               "current instance types, but follow your provider's guidance on live migration.");
    else if (f->hypervisor == TRI_YES)
        fix(x, " On a VM that is live-migrated between hosts with different TSC frequencies, tsc is only safe "
               "with TSC scaling on the host; follow your provider's guidance.");
    if (f->fc_known && strcmp(f->fc_mode, "tsc") == 0)
        fix(x, " Until then, `fastclock run -- your-program` reads the TSC directly.");
}

static void rule_clocksource_syscall(struct ctx *c, struct findings *o)
{
    const struct doctor_facts *f = c->f;
    if (f->vdso_present == TRI_NO || c->enters != TRI_YES)
        return;
    const char *cs = or_unknown(f->cs_current);
    double impact = isnan(c->mono_ns) ? 500 : c->mono_ns - VDSO_TSC_NS;
    struct finding *x = add(o, SEV_PROBLEM, impact, "clocksource-syscall");
    const char *how = c->enters_inferred ? " (inferred: the seccomp check could not run)" : "";

    if (f->cs_vdso == VDSO_CAP_IF_STABLE) {
        /* kvm-clock and xen: the vDSO reads them only with the stable bit. */
        msg(x, "clocksource is %s and the hypervisor does not mark its clock stable (no PVCLOCK_TSC_STABLE_BIT), "
               "so the vDSO cannot read it: every clock_gettime() enters the kernel%s and costs %s",
            cs, how, c->mono_cost);
        if (c->tsc_usable && !c->tsc_current) {
            msg(x, " instead of ~%.0f ns with tsc, which is available and invariant.", VDSO_TSC_NS);
            switch_fix(c, x);
        } else {
            msg(x, "; switching to tsc is no remedy: %s.", c->tsc_unusable);
            fix(x, "%s Otherwise read the clock less often (one timestamp per request or batch), or ask the "
                   "provider for instance types with a stable TSC.",
                c->coarse_advice);
        }
    } else if (f->cs_vdso == VDSO_CAP_YES && (f->klog.timer_erratum || f->counter_erratum)) {
        msg(x, "clock_gettime() enters the kernel%s and costs %s: the kernel works around a timer erratum on this "
               "CPU by trapping counter reads, so the vDSO cannot read %s itself.",
            how, c->mono_cost, cs);
        fix(x, "Nothing to change in the kernel (the workaround keeps time correct). %s Otherwise read the clock "
               "less often (one timestamp per request or batch).",
            c->coarse_advice);
    } else if (f->cs_vdso == VDSO_CAP_YES) {
        msg(x, "clock_gettime() enters the kernel%s and costs %s although clocksource %s can be read by the "
               "vDSO: something in this process's environment (a ptrace or seccomp tracer, an emulator, an "
               "LD_PRELOAD wrapper) sends it to the kernel.",
            how, c->mono_cost, cs);
        fix(x, "Run the program outside that environment. %s", c->coarse_advice);
    } else if (f->cs_current_err) {
        msg(x, "clock_gettime() enters the kernel%s and costs %s; which clocksource the kernel uses is unknown "
               "here (see clocksource-unknown).",
            how, c->mono_cost);
        fix(x, "On the host, read " FC_CLOCKSOURCE_DIR "/current_clocksource%s %s",
            c->tsc_usable ? ": if it is not tsc, switching to tsc (available and invariant here) lets the vDSO read "
                            "the counter."
                          : ".",
            c->coarse_advice);
    } else if (c->tsc_usable && !c->tsc_current) {
        msg(x, "clocksource is %s while tsc is available and invariant: every clock_gettime() enters the kernel%s "
               "and costs %s instead of ~%.0f ns through the vDSO.",
            cs, how, c->mono_cost, VDSO_TSC_NS);
        switch_fix(c, x);
        fix(x, " %s", c->coarse_advice);
    } else {
        msg(x, "clocksource is %s: every clock_gettime() enters the kernel%s and costs %s", cs, how, c->mono_cost);
        if (c->tsc_current)
            msg(x, ", although it is tsc.");
        else
            msg(x, "; switching to tsc is no remedy: %s.", c->tsc_unusable);
        fix(x, "%s Otherwise read the clock less often (one timestamp per request or batch).", c->coarse_advice);
    }
}

static void rule_clocksource_paravirt(struct ctx *c, struct findings *o)
{
    const struct doctor_facts *f = c->f;
    if (c->enters != TRI_NO || !c->tsc_usable || c->tsc_current || f->cs_current_err)
        return;
    if (f->cs_vdso != VDSO_CAP_IF_STABLE && strcmp(f->cs_current, "hyperv_clocksource_tsc_page") != 0)
        return;
    double impact = isnan(c->mono_ns) ? 10 : c->mono_ns - VDSO_TSC_NS;
    struct finding *x = add(o, SEV_INFO, impact, "clocksource-paravirt");
    msg(x, "clocksource is %s, which the vDSO reads without a system call (%s per call); the TSC is available "
           "and invariant, and read directly clock_gettime typically costs %.0f-%.0f ns.",
        f->cs_current, c->mono_cost, VDSO_TSC_NS - 5, VDSO_TSC_NS + 5);
    if (c->list_unfiltered)
        msg(x, " The list of available clocksources is unfiltered (jiffies is listed: the tick is not in one-shot "
               "mode), so tsc being listed does not say the kernel trusts it.");
    fix(x, "Optional: `" SWITCH_NOW "` (persist with `clocksource=tsc`). Providers that live-migrate VMs "
           "(Google Compute Engine among them) choose %s on purpose: there keep it.",
        f->cs_current);
    if (f->fc_known && strcmp(f->fc_mode, "tsc") == 0)
        fix(x, " `fastclock run -- your-program` reads the TSC, calibrated continuously against the kernel's "
               "clock.");
    else if (c->list_unfiltered)
        fix(x, " fastclock leaves the clock to the kernel here, for the same reason; if the kernel log shows no "
               "complaint about the TSC, `FASTCLOCK_MODE=tsc fastclock run -- your-program` reads it, calibrated "
               "continuously against the kernel's clock.");
}

/* ---- the TSC itself ----------------------------------------------------- */

/* What fastclock does where the kernel has left the TSC: the mode the
 * library chose in this process (it may still trust the counter, per CPU),
 * or what it would decide where that is not known. */
static const char *fastclock_without_kernel_tsc(const struct doctor_facts *f)
{
    if (f->fc_known && strcmp(f->fc_mode, "tsc-percpu") == 0)
        return "fastclock still reads the TSC, with a line per CPU (mode tsc-percpu)";
    if (f->fc_known && strcmp(f->fc_mode, "tsc") == 0)
        return "fastclock still reads the TSC (mode tsc)";
    if (f->fc_known && strcmp(f->fc_mode, "system") == 0)
        return "fastclock stays on the kernel's clocks (mode system)";
    return "fastclock decides at start-up whether it can still read the TSC (per CPU, where it is invariant)";
}

static void rule_tsc_unstable(struct ctx *c, struct findings *o)
{
    const struct doctor_facts *f = c->f;
    const struct klog *k = &f->klog;
    if (!k->tsc_unstable && !k->watchdog_tsc)
        return;
    /* Marked at the user's word (tsc=unstable, notsc), on a command line we
     * can read: rule_cmdline says so (unreadable: the finding below, with a
     * fix about the parameter where the log says that was the reason). */
    int by_parameter = k->tsc_unstable && !k->watchdog_tsc && strstr(k->tsc_unstable_reason, "boot parameter");
    if (k->tsc_unstable && !k->watchdog_tsc && !f->cmdline_err && (strstr(f->p_tsc, "unstable") || f->p_notsc))
        return;
    const char *reason = k->tsc_unstable ? k->tsc_unstable_reason : "clocksource watchdog";
    int watchdog = strstr(reason, "watchdog") != NULL || (!k->tsc_unstable && k->watchdog_tsc);
    int sync = strstr(reason, "tsc_sync") != NULL || k->warp_cycles > 0;
    struct finding *x = add(o, c->tsc_current ? SEV_WARNING : SEV_PROBLEM, 400, "tsc-unstable");
    msg(x, "the kernel marked the TSC unstable (\"%s\"", reason);
    if (k->tsc_unstable_s >= 0)
        msg(x, ", %.1f s after boot", k->tsc_unstable_s);
    msg(x, ")");
    if (sync && k->warp_cycles > 0) {
        msg(x, ": at boot it measured the TSCs of two CPUs %lld cycles apart", (long long)k->warp_cycles);
        if (k->warp_cpu_a >= 0)
            msg(x, " (CPU#%d -> CPU#%d)", k->warp_cpu_a, k->warp_cpu_b);
        msg(x, ", so timestamps taken on different CPUs disagree.");
    } else if (watchdog) {
        msg(x, ": its watchdog saw the TSC drift from another clocksource (hpet or acpi_pm) by more than it "
               "tolerates. On a VM this is usually a false alarm (the vCPU was descheduled while the watchdog "
               "read both clocks); on bare metal the TSC may stop in deep C-states or be disturbed by firmware.");
    } else {
        msg(x, ".");
    }
    if (!f->cs_current_err && !c->tsc_current)
        msg(x, " Since then the kernel uses %s%s; %s.", f->cs_current,
            c->enters == TRI_YES ? ", read through a system call" : "", fastclock_without_kernel_tsc(f));

    if (by_parameter) {
        fix(x, "A kernel boot parameter asked for it (`tsc=unstable` or `notsc`%s): remove it and reboot if the "
               "TSC is invariant and the warp check finds no step across CPUs.",
            f->cmdline_err ? "; the command line is unreadable here" : "");
    } else if (sync && k->warp_cycles > 0) {
        fix(x, "The firmware left the CPUs' TSCs out of step: update the BIOS/firmware. Do not force "
               "`tsc=reliable`: timestamps from different CPUs would disagree by that much.");
    } else if (watchdog) {
        char inv[48], warp[192];
        snprintf(inv, sizeof inv, "%s", f->invariant_tsc == TRI_YES ? "it is here" : f->invariant_tsc == TRI_NO ? "it is not here" : "unknown here");
        if (f->warp_ran)
            snprintf(warp, sizeof warp, "%lld cycles measured here", (long long)f->warp_max_cycles);
        else
            snprintf(warp, sizeof warp, "not measured here: %s", f->warp_err);
        fix(x, "If the TSC is invariant (%s) and the warp check finds no backward step across CPUs (%s), the "
               "watchdog was most likely fooled: boot with `tsc=reliable` (turns off the watchdog and the boot-time "
               "check for the TSC; newer kernels also accept `tsc=nowatchdog`, which turns off only the watchdog) and "
               "`clocksource=tsc`. Otherwise keep the kernel's choice and check BIOS C-state settings and firmware "
               "updates.",
            inv, warp);
    } else {
        fix(x, "Look for the cause in the kernel log around that time (`journalctl -k -b | grep -i tsc`); override "
               "the kernel with `tsc=reliable` only if you know the TSC is good.");
    }
}

static void rule_tsc_unavailable(struct ctx *c, struct findings *o)
{
    const struct doctor_facts *f = c->f;
    if (!c->x86 || c->tsc_available || f->cs_available_err || f->klog.tsc_unstable || f->klog.watchdog_tsc)
        return;
    if (f->cpuinfo_err || !fc_word_in_list(f->cpuinfo.flags, "tsc"))
        return;
    struct finding *x = add(o, SEV_WARNING, 300, "tsc-unavailable");
    msg(x, "the kernel offers no tsc clocksource (available: %s)", f->cs_available);
    if (f->klog_readable)
        msg(x, ", and its log has no record of marking the TSC unstable (the record may have rotated out of the "
               "ring buffer)");
    else
        msg(x, "; the kernel log, which would say why, is unreadable here");
    msg(x, ". The kernel either marked the TSC unstable or never registered it (Xen PV guests, `notsc`): "
           "clock reads go through %s; %s.",
        or_unknown(f->cs_current), fastclock_without_kernel_tsc(f));
    fix(x, "Find the reason in the boot log (`journalctl -k -b | grep -i -e tsc -e clocksource`).");
}

static void rule_warp(struct ctx *c, struct findings *o)
{
    const struct doctor_facts *f = c->f;
    if (!warp_found(f))
        return;
    char ns[32] = "";
    if (f->tsc_hz > 0) {
        char t[24];
        format_ns(t, sizeof t, (double)f->warp_max_cycles * 1e9 / f->tsc_hz);
        snprintf(ns, sizeof ns, " (%s)", t);
    }
    struct finding *x = add(o, SEV_PROBLEM, 1000, "tsc-warp");
    msg(x, "the TSCs of CPU %d and CPU %d disagree: an ordered read on one CPU, taken in turn after a read "
           "on the other, returned %lld cycles%s less (%llu backward steps in %llu reads). A timestamp taken on "
           "one CPU can be earlier than one taken before it on another.",
        f->warp_cpu_a, f->warp_cpu_b, (long long)f->warp_max_cycles, ns, (unsigned long long)f->warp_count,
        (unsigned long long)f->warp_iterations);
    /* fastclock itself already stepped back from one line where it runs tsc-percpu or
     * system (its own warp check found this too): nothing to ask of programs then.
     * Where its mode is unknown, the advice stands. */
    if (!f->fc_known || strcmp(f->fc_mode, "tsc") == 0)
        fix(x, "If the kernel still uses tsc, boot with `tsc=unstable` so it stops trusting it; update the "
               "firmware (BIOS), or on a VM report it to the provider. Until then run programs with "
               "FASTCLOCK_MODE=system and never compare raw TSC values across threads.");
    else
        fix(x, "If the kernel still uses tsc, boot with `tsc=unstable` so it stops trusting it; update the "
               "firmware (BIOS), or on a VM report it to the provider. Never compare raw TSC values across "
               "threads; fastclock already keeps to what it can trust here.");
}

static void rule_not_invariant(struct ctx *c, struct findings *o)
{
    const struct doctor_facts *f = c->f;
    if (!c->x86 || f->invariant_tsc != TRI_NO)
        return;
    struct finding *x = add(o, SEV_WARNING, 200, "tsc-not-invariant");
    msg(x, "the CPU does not report an invariant TSC (CPUID 0x80000007 EDX[8])");
    if (f->hypervisor == TRI_YES)
        msg(x, ", which hypervisors often hide to keep live migration possible");
    msg(x, ": its rate may change with the CPU frequency or stop in deep sleep states, so fastclock stays on the "
           "kernel's clocks");
    if (c->tsc_current)
        msg(x, " (the kernel still uses tsc, having checked it in other ways)");
    msg(x, ".");
    const char *hv = f->hv_name;
    if (strcmp(hv, "KVM") == 0 || strncmp(hv, "QEMU", 4) == 0)
        fix(x, "Expose it to the guest: QEMU `-cpu host,+invtsc`, or libvirt `<feature policy='require' "
               "name='invtsc'/>` (this ties the VM to hosts with the same TSC frequency). On a cloud, choose an "
               "instance type that exposes it.");
    else if (f->hypervisor == TRI_YES)
        fix(x, "Configure the hypervisor to pass the invariant-TSC flag through, or choose an instance type that "
               "exposes it.");
    else
        fix(x, "Nothing to change on this CPU: the kernel's clocks are the safe choice.");
}

static void rule_frequency(struct ctx *c, struct findings *o)
{
    const struct doctor_facts *f = c->f;
    /* Against the counter's stated rate only: CPUID 0x16 gives the CPU's base
     * frequency, which on some parts is not the TSC's (Skylake-SP: 2500 against
     * 2494.14 MHz, -2344 ppm), and it is the only source left where the kernel
     * log is unreadable (dmesg_restrict) and 0x15 names no crystal. */
    if (f->measured_tsc_hz <= 0 || f->tsc_hz <= 0 || strncmp(f->tsc_hz_source, "measured", 8) == 0 ||
        strstr(f->tsc_hz_source, "0x16"))
        return;
    double ppm = (f->measured_tsc_hz - f->tsc_hz) / f->tsc_hz * 1e6;
    if (fabs(ppm) <= 1000)
        return;
    struct finding *x = add(o, SEV_WARNING, 150, "tsc-frequency-mismatch");
    msg(x, "the counter runs at %.3f MHz measured against CLOCK_MONOTONIC_RAW, but its nominal frequency (%s) is "
           "%.3f MHz (%+.0f ppm): "
           "a program that converts ticks with the nominal frequency gets intervals %.2f%% wrong. This happens "
           "after a live migration to a host with a different TSC frequency without TSC scaling, or after a poor "
           "boot calibration.",
        f->measured_tsc_hz / 1e6, f->tsc_hz_source, f->tsc_hz / 1e6, ppm, fabs(ppm) / 1e4);
    fix(x, "Convert ticks with a frequency measured against the kernel's clock (fastclock does, continuously), "
           "not the nominal one; on a VM, ask for TSC scaling on the host.");
}

/* ---- kernel command line ------------------------------------------------ */

static void rule_cmdline(struct ctx *c, struct findings *o)
{
    const struct doctor_facts *f = c->f;
    if (f->cmdline_err)
        return;
    if (f->p_clocksource[0] && strcmp(f->p_clocksource, "tsc") != 0) {
        /* Where the list is unfiltered, tsc may be listed though the kernel marked it unstable. */
        int trusted = c->tsc_usable && !c->list_unfiltered;
        struct finding *x = add(o, trusted ? SEV_WARNING : SEV_INFO, 100, "cmdline-clocksource");
        msg(x, "the kernel command line pins `clocksource=%s`%s.", f->p_clocksource,
            trusted ? " although tsc is available and invariant" : "");
        if (trusted)
            fix(x, "Remove `clocksource=%s` (or write `clocksource=tsc`) and reboot.", f->p_clocksource);
        else
            fix(x, "Keep it if it was chosen deliberately.");
    }
    if (strstr(f->p_tsc, "reliable")) {
        int bad = warp_found(f);
        struct finding *x = add(o, bad ? SEV_WARNING : SEV_INFO, 50, "cmdline-tsc-reliable");
        msg(x, "`tsc=%s` on the kernel command line turns off the clocksource watchdog and the boot-time TSC sync "
               "check",
            f->p_tsc);
        if (bad)
            msg(x, ", yet the warp check here found %lld cycles between CPUs: nothing protects programs from it.",
                (long long)f->warp_max_cycles);
        else if (f->warp_ran && f->warp_pairs_skipped > 0)
            msg(x, "; the warp check here found no backward step, but could not compare %d CPU pair%s.",
                f->warp_pairs_skipped, f->warp_pairs_skipped == 1 ? "" : "s");
        else if (f->warp_ran)
            msg(x, "; the warp check here found no backward step, so the TSC looks synchronised.");
        else
            msg(x, ".");
        fix(x, bad ? "Remove `tsc=reliable` and reboot." : "Keep it only while the TSC is invariant and warp-free.");
    }
    if (strstr(f->p_tsc, "unstable") || f->p_notsc) {
        int pity = f->invariant_tsc == TRI_YES && !warp_found(f);
        struct finding *x = add(o, pity ? SEV_WARNING : SEV_INFO, 120, "cmdline-tsc-disabled");
        msg(x, "`%s` on the kernel command line tells the kernel not to use the TSC%s.",
            f->p_notsc ? "notsc" : "tsc=unstable", pity ? ", although it is invariant" : "");
        fix(x, pity ? "If the warp check finds nothing across CPUs, remove it and reboot: the vDSO then reads the TSC "
                      "directly."
                    : "Keep it while the TSC is unreliable.");
    }
}

/* ---- synchronisation ---------------------------------------------------- */

static void rule_sync(struct ctx *c, struct findings *o)
{
    const struct doctor_facts *f = c->f;
    (void)c;
    if (!f->sync_known)
        return;
    char maxerr[32];
    format_ns(maxerr, sizeof maxerr, (double)f->maxerror_us * 1e3);
    if (f->synchronized == TRI_NO) {
        struct finding *x = add(o, SEV_WARNING, 100, "clock-unsynchronized");
        msg(x, "the kernel's clock is not synchronised (adjtimex reports %s): CLOCK_REALTIME runs freely on the "
               "hardware oscillator, typically 10-100 ppm off (up to 9 s a day), and its maximum error is %s",
            f->sync_state == 5 ? "TIME_ERROR" : "STA_UNSYNC", maxerr);
        if (!f->daemons_scanned)
            msg(x, "; running time daemons are unknown (%s)", f->daemons_err);
        else if (!f->daemons[0])
            msg(x, "; no time daemon is running");
        else
            msg(x, "; %s is running but has not synchronised the clock", f->daemons);
        msg(x, ". Timestamps compared across machines (logs, traces, leases, certificates) drift apart; "
               "CLOCK_MONOTONIC intervals are not affected.");
        if (f->daemons[0])
            fix(x, "Check the daemon's sources (`chronyc tracking`, `timedatectl timesync-status`); a blocked UDP "
                   "port 123 is the usual cause.");
        else
            fix(x, "Run a time daemon: `apt install chrony` (or `systemctl enable --now systemd-timesyncd`); on "
                   "KVM, chrony's `refclock PHC /dev/ptp0` with the ptp_kvm module follows the host's clock to "
                   "microseconds. In a container, fix it on the host.");
    } else if (f->synchronized == TRI_YES && f->maxerror_us > 100000) {
        struct finding *x = add(o, SEV_WARNING, 60, "sync-maxerror");
        msg(x, "the kernel's clock is synchronised (%s) but its maximum error is %s: CLOCK_REALTIME may be that "
               "far from UTC.",
            f->daemons[0] ? f->daemons : "daemon unknown", maxerr);
        fix(x, "Check the daemon's sources; a distant or overloaded server makes the bound loose.");
    }
    if (f->leap_pending) {
        struct finding *x = add(o, SEV_INFO, 40, "leap-pending");
        msg(x, "a leap second is scheduled at the end of the day (UTC): CLOCK_REALTIME will %s a second.",
            f->leap_pending > 0 ? "repeat" : "skip");
        fix(x, "Measure intervals with CLOCK_MONOTONIC or CLOCK_TAI, or smear the leap (chrony `leapsecmode "
               "slew`).");
    }
}

/* ---- kernel log events -------------------------------------------------- */

static const struct klog_event *first_event(const struct klog *k, enum klog_kind kind)
{
    for (int i = 0; i < k->nevents; i++)
        if (k->ev[i].kind == kind)
            return &k->ev[i];
    return NULL;
}

static void rule_klog(struct ctx *c, struct findings *o)
{
    const struct doctor_facts *f = c->f;
    const struct klog *k = &f->klog;
    /* Known from the device tree or the CPU part where the log says nothing
     * (unreadable: Debian's dmesg_restrict=1, or rotated away). */
    if (f->counter_erratum && !(f->klog_readable && first_event(k, KLOG_TIMER_ERRATUM))) {
        struct finding *x = add(o, SEV_WARNING, 80, "timer-erratum");
        msg(x, "%s.", f->counter_erratum_why);
        fix(x, "The clocks table shows whether clock_gettime enters the kernel here; if it does, read the clock less "
               "often. %s",
            c->coarse_advice);
    }
    if (!f->klog_readable) {
        struct finding *x = add(o, SEV_INFO, 5, "kernel-log-unreadable");
        if (f->live) {
            msg(x, "the kernel log is unreadable (%s): TSC and clocksource events (watchdog, warp, switches) are "
                   "unknown.",
                fc_errno_text(f->klog_err));
            if (f->klog_err == EPERM || f->klog_err == EACCES)
                fix(x, "Run as root, or allow reading it with `sysctl kernel.dmesg_restrict=0`.");
            else
                fix(x, "No kernel log here (a container?): run `dmesg` on the host.");
        } else {
            msg(x, "the capture has no kernel log (dev/kmsg): TSC and clocksource events are unknown.");
        }
        return;
    }
    const struct klog_event *e;
    if ((e = first_event(k, KLOG_TIMER_ERRATUM))) {
        struct finding *x = add(o, SEV_WARNING, 80, "timer-erratum");
        msg(x, "the kernel works around an arch timer erratum (\"%s\"): on affected CPUs the vDSO may fall back to "
               "system calls.",
            e->text);
        fix(x, "The clocks table shows whether clock_gettime enters the kernel here; if it does, read the clock less "
               "often. %s",
            c->coarse_advice);
    }
    if ((e = first_event(k, KLOG_SKEW))) {
        struct finding *x = add(o, SEV_WARNING, 90, "clocksource-skew");
        msg(x, "the kernel's clocksource verification found CPUs out of step (\"%s\").", e->text);
        fix(x, "Compare with the warp check below; update the firmware if the TSCs really disagree.");
    }
    if (k->watchdog_skips) {
        struct finding *x = add(o, SEV_INFO, 20, "watchdog-skipped");
        msg(x, "the clocksource watchdog skipped %d check%s because reading the clocks took too long: a sign of "
               "vCPU preemption (steal time) on this machine.",
            k->watchdog_skips, k->watchdog_skips == 1 ? "" : "s");
        fix(x, "Nothing to change while the TSC stays trusted; if the watchdog ever marks it unstable, see "
               "tsc-unstable.");
    }
    if ((e = first_event(k, KLOG_TSC_ADJUST))) {
        struct finding *x = add(o, SEV_INFO, 30, "tsc-adjust");
        msg(x, "the kernel found TSC_ADJUST values written by the firmware and corrected them (%d message%s, e.g. "
               "\"%s\").",
            k->tsc_adjust, k->tsc_adjust == 1 ? "" : "s", e->text);
        fix(x, "Nothing to do while no warp is measured; a firmware update may remove the cause.");
    }
}

/* ---- the counter's resolution ------------------------------------------- */

static void rule_counter_resolution(struct ctx *c, struct findings *o)
{
    const struct doctor_facts *f = c->f;
    if (f->tsc_hz <= 0 || f->tsc_hz >= 100e6)
        return;
    struct finding *x = add(o, SEV_INFO, 25, "counter-resolution");
    msg(x, "the %s counter ticks at %.2f MHz: clock values advance in steps of %.0f ns.",
        c->arm ? "generic timer" : "time-stamp", f->tsc_hz / 1e6, 1e9 / f->tsc_hz);
    fix(x, "Nothing to change (a property of the SoC%s); do not time sub-microsecond events with it.",
        c->arm ? "; cores from ARMv8.6 count at 1 GHz" : "");
}

/* ---- fastclock ------------------------------------------------------------ */

static double gain_over(double libc_ns, double fc_ns)
{
    return fc_ns > 0 && !isnan(libc_ns) ? libc_ns / fc_ns : NAN;
}

double findings_link_gain(const struct doctor_facts *f) { return gain_over(f->call[1].libc_ns, f->fc_ns); }
double findings_run_gain(const struct doctor_facts *f) { return gain_over(f->call[1].libc_ns, f->fc_gettime_ns); }

/* What `fastclock run` gives a program: clock_gettime through the shim costs
 * what fastclock_gettime does, not fastclock_mono_ns (measured apart: its
 * timespec split, and the call's clock id).  Writes the advice into buf:
 * "run" where that is a gain in this run, else linking only. */
static void advise_fastclock(const struct ctx *c, char *buf, size_t size)
{
    const struct doctor_facts *f = c->f;
    double run_ratio = findings_run_gain(f);
    char gt[32];
    format_ns(gt, sizeof gt, f->fc_gettime_ns);
    if (!isnan(run_ratio) && run_ratio >= FINDINGS_GAIN_RATIO)
        snprintf(buf, size,
                 "`fastclock run -- your-program` gives clock_gettime %s (%.1fx) without code changes; linking "
                 "libfastclock and calling fastclock_mono_ns() gives the figure above.",
                 gt, run_ratio);
    else if (!isnan(run_ratio))
        snprintf(buf, size,
                 "Link libfastclock and call fastclock_mono_ns() for that; `fastclock run` would not speed up "
                 "clock_gettime itself here (%s through fastclock against %s).",
                 gt, c->mono_cost);
    else
        snprintf(buf, size, "Link libfastclock and call fastclock_mono_ns() for that.");
}

static void rule_fastclock(struct ctx *c, struct findings *o)
{
    const struct doctor_facts *f = c->f;
    if (!f->fc_known)
        return;
    if (strcmp(f->fc_mode, "tsc") == 0 && !isnan(f->fc_ns) && !isnan(c->mono_ns) && f->fc_ns > 0) {
        double ratio = findings_link_gain(f);
        char fc[32], un[32] = "?";
        format_ns(fc, sizeof fc, f->fc_ns);
        if (!isnan(f->fc_unordered_ns))
            format_ns(un, sizeof un, f->fc_unordered_ns);
        if (c->enters == TRI_YES) {
            struct finding *x = add(o, SEV_INFO, c->mono_ns - f->fc_ns, "fastclock-gain");
            msg(x, c->arm ? "fastclock reads the counter (cntvct_el0) directly: %s per call instead of %s for "
                            "clock_gettime (%.0fx), without changing the clocksource."
                          : "fastclock reads the TSC directly: %s per call instead of %s for clock_gettime (%.0fx), "
                            "without changing the clocksource.",
                fc, c->mono_cost, ratio);
            char advice[400];
            advise_fastclock(c, advice, sizeof advice);
            fix(x, "%s", advice);
        } else {
            struct finding *x = add(o, SEV_OK, c->mono_ns - f->fc_ns, "fastclock-gain");
            /* One run's ratio: within 5% either way is noise, and not called a gain. */
            char versus[48];
            if (ratio >= FINDINGS_GAIN_RATIO)
                snprintf(versus, sizeof versus, "%.1fx faster", ratio);
            else if (ratio > 2 - FINDINGS_GAIN_RATIO)
                snprintf(versus, sizeof versus, "about as fast");
            else
                snprintf(versus, sizeof versus, "%.2fx its cost: slower in this run", 1 / ratio);
            msg(x, "reading the time is cheap here: clock_gettime(CLOCK_MONOTONIC) costs %s through the vDSO; "
                   "fastclock reads the same clock in %s (%s), or %s unordered.",
                c->mono_cost, fc, versus, un);
            if (ratio >= FINDINGS_GAIN_RATIO) { /* no gain, nothing to recommend */
                char advice[400];
                advise_fastclock(c, advice, sizeof advice);
                fix(x, "%s", advice);
            }
        }
    } else if (strcmp(f->fc_mode, "tsc-percpu") == 0) {
        /* Trusted per CPU only (the kernel distrusts the TSC, or a warp was found). */
        struct finding *x = add(o, SEV_INFO, 10, "fastclock-percpu");
        if (f->fc_forced) {
            msg(x, "fastclock reads one line per CPU, as FASTCLOCK_MODE asks (%s); monotonic within a thread, "
                   "across threads within the reported bound.",
                or_unknown(f->fc_reason));
        } else if (strncmp(f->fc_counter, "clock_gettime", 13) == 0) {
            msg(x, "fastclock trusts each CPU's counter but not one line across them (%s). The kernel still reads "
                   "the TSC, and its clock is the cheaper read: it answers fastclock's fine reads, the coarse ones "
                   "come from memory.",
                or_unknown(f->fc_reason));
        } else {
            msg(x, "fastclock trusts each CPU's counter but not one line across them (%s): each CPU's counter is "
                   "calibrated separately and read with rdtscp, monotonic within a thread, across threads within "
                   "the reported bound.",
                or_unknown(f->fc_reason));
        }
        if (f->fc_forced)
            fix(x, "FASTCLOCK_MODE chose this mode, not the machine: unset it (or set it to auto) to let fastclock "
                   "decide from what the CPUs' counters do.");
        else if (warp_found(f) || f->klog.warp_cycles > 0 || strstr(f->fc_reason, " disagree by "))
            fix(x, "Nothing to change in programs. The counters of this machine's CPUs disagree: %s",
                f->hypervisor == TRI_YES
                    ? "a host that keeps its guests' TSCs in step (one TSC offset per VM, an invariant TSC) "
                      "gives fastclock one line again."
                    : "check the firmware's TSC settings (TSC_ADJUST writes, a BIOS option that resets the "
                      "counters per socket).");
        else
            /* No warp measured, here or by the kernel at boot: the kernel
             * distrusts the TSC for another reason (its watchdog, often a
             * false alarm on a VM; a boot parameter), which the findings
             * above name -- the counters are not shown to disagree. */
            fix(x, "Nothing to change in programs. No warp between the CPUs' counters was measured; fastclock "
                   "follows the kernel, which stopped trusting the TSC (the reason says how): see the findings "
                   "above on why (tsc-unstable, the command line). Where the kernel trusts the TSC again, fastclock "
                   "reads one line.");
    } else if (strncmp(f->fc_mode, "system", 6) == 0) {
        struct finding *x = add(o, SEV_INFO, 10, "fastclock-system");
        msg(x, "fastclock uses the kernel's clocks here: %s.", or_unknown(f->fc_reason));
        if (f->fc_forced)
            fix(x, "FASTCLOCK_MODE chose this mode, not the machine: unset it (or set it to auto) to let fastclock "
                   "decide.");
        else if (c->enters == TRI_YES)
            fix(x, "The findings above say what would let it read the %s. %s", c->arm ? "counter" : "TSC",
                c->coarse_advice);
        else
            fix(x, "Nothing to change: reads cost what clock_gettime costs.");
    }
}

static void rule_unknowns(struct ctx *c, struct findings *o)
{
    const struct doctor_facts *f = c->f;
    if (f->cs_current_err) {
        struct finding *x = add(o, SEV_INFO, 15, "clocksource-unknown");
        msg(x, "the current clocksource is unknown (" FC_CLOCKSOURCE_DIR "/current_clocksource: %s), so the doctor "
               "cannot say whether reading the clock costs a system call.",
            fc_errno_text(f->cs_current_err));
        fix(x, "Run where /sys is mounted (containers may hide it), or on the host.");
    }
    if (f->seccomp_ok == TRI_NO) {
        struct finding *x = add(o, SEV_INFO, 15, "seccomp-unavailable");
        msg(x, "could not check for certain whether clock calls enter the kernel (%s); the verdicts rely on "
               "timing instead.",
            f->seccomp_err);
    }
}

/* ---- ranking -------------------------------------------------------------- */

static int cmp_findings(const void *a, const void *b)
{
    const struct finding *x = a, *y = b;
    if (x->severity != y->severity)
        return x->severity > y->severity ? -1 : 1;
    if (x->impact != y->impact)
        return x->impact > y->impact ? -1 : 1;
    return strcmp(x->id, y->id);
}

void findings_compute(const struct doctor_facts *facts, struct findings *out)
{
    struct ctx c;
    setup(&c, facts);
    out->n = 0;
    rule_no_vdso(&c, out);
    rule_clocksource_syscall(&c, out);
    rule_clocksource_paravirt(&c, out);
    rule_tsc_unstable(&c, out);
    rule_tsc_unavailable(&c, out);
    rule_warp(&c, out);
    rule_not_invariant(&c, out);
    rule_frequency(&c, out);
    rule_cmdline(&c, out);
    rule_sync(&c, out);
    rule_klog(&c, out);
    rule_counter_resolution(&c, out);
    rule_fastclock(&c, out);
    rule_unknowns(&c, out);
    qsort(out->f, (size_t)out->n, sizeof out->f[0], cmp_findings);
}

enum severity findings_worst(const struct findings *fs)
{
    enum severity w = SEV_OK;
    for (int i = 0; i < fs->n; i++)
        if (fs->f[i].severity > w)
            w = fs->f[i].severity;
    return w;
}

const struct finding *findings_get(const struct findings *fs, const char *id)
{
    for (int i = 0; i < fs->n; i++)
        if (strcmp(fs->f[i].id, id) == 0)
            return &fs->f[i];
    return NULL;
}
