#define _GNU_SOURCE
#include "sysparse.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

char *read_file_alloc(const char *root, const char *path, size_t max, size_t *len, int *err)
{
    char full[1024];
    snprintf(full, sizeof full, "%s%s", root ? root : "", path);
    *err = 0;
    if (len)
        *len = 0;
    int fd = open(full, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *err = errno;
        return NULL;
    }
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        *err = ENOMEM;
        return NULL;
    }
    for (;;) {
        if (n == cap) {
            if (cap >= max)
                break;
            size_t ncap = cap * 2 > max ? max : cap * 2;
            char *nb = realloc(buf, ncap + 1);
            if (!nb)
                break;
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            *err = errno;
            free(buf);
            close(fd);
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
}

/* ---- /proc/cpuinfo -------------------------------------------------------- */

const char *const tsc_flag_names[6] = {"constant_tsc", "nonstop_tsc",  "rdtscp",
                                       "tsc_known_freq", "tsc_reliable", "tsc_adjust"};

const char *arm_core_name(unsigned implementer, unsigned part)
{
    static const struct { unsigned impl, part; const char *name; } known[] = {
        {0x41, 0xd03, "ARM Cortex-A53"},   {0x41, 0xd07, "ARM Cortex-A57"},
        {0x41, 0xd08, "ARM Cortex-A72"},   {0x41, 0xd09, "ARM Cortex-A73"},
        {0x41, 0xd0b, "ARM Cortex-A76"},   {0x41, 0xd0c, "ARM Neoverse-N1"},
        {0x41, 0xd40, "ARM Neoverse-V1"},  {0x41, 0xd49, "ARM Neoverse-N2"},
        {0x41, 0xd4f, "ARM Neoverse-V2"},  {0x41, 0xd84, "ARM Neoverse-V3"},
        {0x48, 0xd01, "HiSilicon Kunpeng-920"}, {0x50, 0x000, "Applied Micro X-Gene"},
        {0xc0, 0xac3, "Ampere AmpereOne"}, {0x51, 0xc00, "Qualcomm Falkor"},
        {0x61, 0x022, "Apple M1 Icestorm"}, {0x61, 0x023, "Apple M1 Firestorm"},
    };
    for (unsigned i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i].impl == implementer && known[i].part == part)
            return known[i].name;
    return NULL;
}

/* Value of a "key<tabs>: value" line if it starts with key; else NULL. */
static const char *cpuinfo_value(const char *line, const char *key)
{
    size_t kl = strlen(key);
    if (strncmp(line, key, kl) != 0)
        return NULL;
    const char *p = line + kl;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p != ':')
        return NULL;
    p++;
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

void cpuinfo_parse(const char *text, struct cpuinfo *ci)
{
    memset(ci, 0, sizeof *ci);
    int blocks = 0; /* only the first processor's block fills the fields */
    const char *p = text;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t whole = eol ? (size_t)(eol - p) : strlen(p);
        char line[4200];
        size_t n = whole < sizeof line ? whole : sizeof line - 1; /* a longer line is cut, not split */
        memcpy(line, p, n);
        line[n] = 0;
        p += whole + (eol ? 1 : 0);
        if (!eol && whole == 0)
            break;
        const char *v;
        if (cpuinfo_value(line, "processor")) {
            ci->processors++;
            blocks++;
            continue;
        }
        if (blocks > 1)
            continue;
        if ((v = cpuinfo_value(line, "vendor_id")))
            copy_str(ci->vendor_id, sizeof ci->vendor_id, v);
        else if ((v = cpuinfo_value(line, "model name")))
            copy_str(ci->model_name, sizeof ci->model_name, v);
        else if ((v = cpuinfo_value(line, "flags")))
            copy_str(ci->flags, sizeof ci->flags, v);
        else if ((v = cpuinfo_value(line, "Features"))) {
            copy_str(ci->flags, sizeof ci->flags, v);
            ci->is_arm = 1;
        } else if ((v = cpuinfo_value(line, "CPU implementer"))) {
            ci->implementer = (unsigned)strtoul(v, NULL, 0);
            ci->is_arm = 1;
        } else if ((v = cpuinfo_value(line, "CPU part"))) {
            ci->part = (unsigned)strtoul(v, NULL, 0);
        }
    }
    trim(ci->model_name);
    trim(ci->flags);
    if (ci->is_arm && !ci->model_name[0]) {
        const char *name = arm_core_name(ci->implementer, ci->part);
        if (name)
            copy_str(ci->model_name, sizeof ci->model_name, name);
        else
            snprintf(ci->model_name, sizeof ci->model_name, "arm64 implementer 0x%02x part 0x%03x",
                     ci->implementer, ci->part);
    }
}

/* ---- kernel log ----------------------------------------------------------- */

const char *klog_kind_name(enum klog_kind k)
{
    static const char *const names[KLOG_KIND_COUNT] = {
        "clocksource-switch", "tsc-unstable", "watchdog-unstable", "tsc-warp",
        "tsc-frequency",      "tsc-adjust",   "watchdog-skipped",  "clocksource-skew",
        "counter-frequency",  "timer-erratum", "firmware-bug",
    };
    return (unsigned)k < KLOG_KIND_COUNT ? names[k] : "unknown";
}

/* Splits one log line into timestamp (or -1) and message. */
static const char *klog_split(const char *line, double *ts)
{
    *ts = -1;
    const char *p = line;
    /* /dev/kmsg: "prio,seq,usec,flags[,...];message" */
    if (isdigit((unsigned char)*p)) {
        const char *semi = strchr(p, ';');
        const char *c1 = strchr(p, ',');
        if (semi && c1 && c1 < semi) {
            const char *c2 = strchr(c1 + 1, ',');
            if (c2 && c2 < semi) {
                char *end;
                double us = strtod(c2 + 1, &end);
                if (end != c2 + 1)
                    *ts = us / 1e6;
                return semi + 1;
            }
        }
    }
    /* syslog(2): "<6>" before the dmesg form */
    if (*p == '<') {
        const char *gt = strchr(p, '>');
        if (gt && gt - p <= 4)
            p = gt + 1;
    }
    /* dmesg: "[   12.345678] message" */
    if (*p == '[') {
        char *end;
        double s = strtod(p + 1, &end);
        if (end != p + 1 && *end == ']') {
            *ts = s;
            p = end + 1;
            while (*p == ' ')
                p++;
        }
    }
    return p;
}

static struct klog_event *klog_add(struct klog *k, enum klog_kind kind, double ts, const char *msg)
{
    if (k->nevents >= KLOG_MAX_EVENTS) {
        k->dropped++;
        return NULL;
    }
    struct klog_event *e = &k->ev[k->nevents++];
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->time_s = ts;
    copy_str(e->text, sizeof e->text, msg);
    trim(e->text);
    return e;
}

/* "... <MHz> MHz ..." after `after` in msg: returns Hz, or 0. */
static double mhz_after(const char *msg, const char *after)
{
    const char *p = strstr(msg, after);
    if (!p)
        return 0;
    p += strlen(after);
    char *end;
    double v = strtod(p, &end);
    if (end == p)
        return 0;
    while (*end == ' ')
        end++;
    return strncmp(end, "MHz", 3) == 0 ? v * 1e6 : 0;
}

static void klog_line(struct klog *k, const char *line, int *pending_a, int *pending_b)
{
    double ts;
    const char *msg = klog_split(line, &ts);
    const char *p;
    struct klog_event *e;
    k->records++;
    if (ts >= 0 && (k->first_s < 0 || ts < k->first_s))
        k->first_s = ts;

    if ((p = strstr(msg, "Switched to clocksource "))) {
        char name[64];
        copy_str(name, sizeof name, p + strlen("Switched to clocksource "));
        name[strcspn(name, " \t\r\n")] = 0;
        if ((e = klog_add(k, KLOG_SWITCH, ts, msg)))
            copy_str(e->value, sizeof e->value, name);
        copy_str(k->last_switch, sizeof k->last_switch, name);
        k->last_switch_s = ts;
    } else if ((p = strstr(msg, "Marking TSC unstable due to"))) {
        /* "due to clocksource watchdog" and the older "due to: check_tsc_sync_source failed." */
        char reason[96];
        p += strlen("Marking TSC unstable due to");
        while (*p == ':' || *p == ' ')
            p++;
        copy_str(reason, sizeof reason, p);
        trim(reason);
        size_t n = strlen(reason);
        if (n && reason[n - 1] == '.')
            reason[n - 1] = 0;
        if ((e = klog_add(k, KLOG_TSC_UNSTABLE, ts, msg)))
            copy_str(e->value, sizeof e->value, reason);
        if (!k->tsc_unstable) {
            k->tsc_unstable = 1;
            copy_str(k->tsc_unstable_reason, sizeof k->tsc_unstable_reason, reason);
            k->tsc_unstable_s = ts;
        }
    } else if ((p = strstr(msg, "Marking clocksource '"))) {
        char name[64];
        copy_str(name, sizeof name, p + strlen("Marking clocksource '"));
        name[strcspn(name, "'")] = 0;
        if ((e = klog_add(k, KLOG_WATCHDOG, ts, msg)))
            copy_str(e->value, sizeof e->value, name);
        if (strcmp(name, "tsc") == 0)
            k->watchdog_tsc = 1;
    } else if ((p = strstr(msg, "Clocksource ")) && strstr(msg, " unstable (delta")) {
        /* Kernels before 4.x: "Clocksource tsc unstable (delta = -123 ns)" */
        char name[64];
        copy_str(name, sizeof name, p + strlen("Clocksource "));
        name[strcspn(name, " ")] = 0;
        if ((e = klog_add(k, KLOG_WATCHDOG, ts, msg)))
            copy_str(e->value, sizeof e->value, name);
        if (strcmp(name, "tsc") == 0)
            k->watchdog_tsc = 1;
    } else if ((p = strstr(msg, "TSC synchronization [CPU#"))) {
        /* The next line says whether it warped; remember the pair. */
        int a, b;
        if (sscanf(p, "TSC synchronization [CPU#%d -> CPU#%d]", &a, &b) == 2) {
            *pending_a = a;
            *pending_b = b;
        }
    } else if ((p = strstr(msg, "Measured ")) && strstr(msg, "cycles TSC warp between CPUs")) {
        long long cycles = 0;
        sscanf(p, "Measured %lld cycles", &cycles);
        if ((e = klog_add(k, KLOG_WARP, ts, msg))) {
            e->number = (double)cycles;
            if (*pending_a >= 0)
                snprintf(e->value, sizeof e->value, "CPU#%d -> CPU#%d", *pending_a, *pending_b);
        }
        if (cycles >= k->warp_cycles) {
            k->warp_cycles = cycles;
            k->warp_cpu_a = *pending_a;
            k->warp_cpu_b = *pending_b;
        }
    } else if (strstr(msg, "Refined TSC clocksource calibration:")) {
        double hz = mhz_after(msg, "calibration:");
        if (hz > 0) {
            if ((e = klog_add(k, KLOG_TSC_FREQ, ts, msg))) {
                e->number = hz;
                copy_str(e->value, sizeof e->value, "refined");
            }
            k->refined_hz = hz;
        }
    } else if (strstr(msg, "tsc: Detected ")) {
        /* "tsc: Detected 2500.000 MHz processor" is the CPU's base frequency;
         * "tsc: Detected 2494.140 MHz TSC" (when both are printed) the TSC's. */
        double hz = mhz_after(msg, "Detected ");
        int is_tsc = strstr(msg, "MHz TSC") != NULL;
        if (hz > 0) {
            if ((e = klog_add(k, KLOG_TSC_FREQ, ts, msg))) {
                e->number = hz;
                copy_str(e->value, sizeof e->value, is_tsc ? "detected TSC" : "detected processor");
            }
            if (is_tsc || !k->detected_is_tsc)
                k->detected_hz = hz;
            k->detected_is_tsc |= is_tsc;
        }
    } else if (strstr(msg, "TSC found unstable after boot")) {
        /* Printed with the watchdog's verdict: "most likely due to broken BIOS". */
        if ((e = klog_add(k, KLOG_TSC_UNSTABLE, ts, msg)))
            copy_str(e->value, sizeof e->value, "found unstable after boot");
        if (!k->tsc_unstable) {
            k->tsc_unstable = 1;
            copy_str(k->tsc_unstable_reason, sizeof k->tsc_unstable_reason, "found unstable after boot");
            k->tsc_unstable_s = ts;
        }
    } else if (strstr(msg, "TSC ADJUST")) {
        klog_add(k, KLOG_TSC_ADJUST, ts, msg);
        k->tsc_adjust++;
    } else if (strstr(msg, "Long readout interval, skipping watchdog check") ||
               strstr(msg, "clock-skew test skipped") || strstr(msg, "read-back delay of")) {
        /* Many of these on a busy VM: count them, keep the first few. */
        if (k->watchdog_skips++ < 3)
            klog_add(k, KLOG_WATCHDOG_SKIP, ts, msg);
    } else if ((strstr(msg, " ahead of CPU ") || strstr(msg, " behind CPU ")) && strstr(msg, "for clocksource")) {
        klog_add(k, KLOG_SKEW, ts, msg);
        k->skew++;
    } else if ((p = strstr(msg, "arch_timer:")) && strstr(msg, "running at ")) {
        /* "arch_timer: cp15 timer(s) running at 25.00MHz (virt)." */
        const char *q = strstr(msg, "running at ") + strlen("running at ");
        char *end;
        double mhz = strtod(q, &end);
        if (end != q && strncmp(end, "MHz", 3) == 0) {
            if ((e = klog_add(k, KLOG_COUNTER_FREQ, ts, msg)))
                e->number = mhz * 1e6;
            k->counter_hz = mhz * 1e6;
        }
    } else if ((p = strstr(msg, "arch_timer:")) &&
               (strstr(msg, "workaround for") || strstr(msg, "Trapping CNTVCT"))) {
        klog_add(k, KLOG_TIMER_ERRATUM, ts, msg);
        k->timer_erratum = 1;
    } else if (strstr(msg, "[Firmware Bug]") && strstr(msg, "TSC")) {
        klog_add(k, KLOG_FIRMWARE_BUG, ts, msg);
    }
}

void klog_parse(const char *text, struct klog *out)
{
    memset(out, 0, sizeof *out);
    out->first_s = -1;
    out->last_switch_s = -1;
    out->tsc_unstable_s = -1;
    out->warp_cpu_a = out->warp_cpu_b = -1;
    int pending_a = -1, pending_b = -1;
    const char *p = text;
    while (p && *p) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        /* Continuation lines of /dev/kmsg records (" SUBSYSTEM=...") and of
         * multi-line messages start with a space: not records. */
        if (n > 0 && *p != ' ' && *p != '\t') {
            char line[1024];
            if (n >= sizeof line)
                n = sizeof line - 1;
            memcpy(line, p, n);
            line[n] = 0;
            if (line[n - 1] == '\r')
                line[n - 1] = 0;
            klog_line(out, line, &pending_a, &pending_b);
        }
        p = eol ? eol + 1 : NULL;
    }
}

/* ---- DMI ------------------------------------------------------------------ */

static int has(const char *s, const char *needle) { return strcasestr(s, needle) != NULL; }

void cloud_detect(const struct dmi *d, char *name, size_t size, char *evidence, size_t esize)
{
    const char *n = "", *ev = "";
    char evbuf[160];
    evbuf[0] = 0;
#define EVIDENCE(field) (snprintf(evbuf, sizeof evbuf, #field "=\"%s\"", d->field), ev = evbuf)
    if (has(d->sys_vendor, "Amazon EC2") || has(d->bios_vendor, "Amazon EC2")) {
        n = "AWS EC2 (Nitro)";
        EVIDENCE(sys_vendor);
    } else if (has(d->bios_version, "amazon")) {
        n = "AWS EC2 (Xen)";
        EVIDENCE(bios_version);
    } else if (has(d->product_name, "Google Compute Engine") || has(d->sys_vendor, "Google")) {
        n = "Google Compute Engine";
        EVIDENCE(product_name);
    } else if (has(d->sys_vendor, "Microsoft Corporation") && has(d->product_name, "Virtual Machine")) {
        /* Azure marks its VMs with a fixed chassis asset tag. */
        if (strcmp(d->chassis_asset_tag, "7783-7084-3265-9085-8269-3286-77") == 0) {
            n = "Microsoft Azure";
            EVIDENCE(chassis_asset_tag);
        } else {
            n = "Hyper-V";
            EVIDENCE(product_name);
        }
    } else if (has(d->sys_vendor, "Alibaba Cloud") || has(d->product_name, "Alibaba Cloud")) {
        n = "Alibaba Cloud ECS";
        EVIDENCE(sys_vendor);
    } else if (has(d->chassis_asset_tag, "OracleCloud")) {
        n = "Oracle Cloud";
        EVIDENCE(chassis_asset_tag);
    } else if (has(d->sys_vendor, "DigitalOcean")) {
        n = "DigitalOcean";
        EVIDENCE(sys_vendor);
    } else if (has(d->sys_vendor, "Hetzner")) {
        n = "Hetzner Cloud";
        EVIDENCE(sys_vendor);
    } else if (has(d->sys_vendor, "Linode") || has(d->sys_vendor, "Akamai")) {
        n = "Akamai (Linode)";
        EVIDENCE(sys_vendor);
    } else if (has(d->sys_vendor, "Scaleway")) {
        n = "Scaleway";
        EVIDENCE(sys_vendor);
    } else if (has(d->product_name, "OpenStack") || has(d->sys_vendor, "OpenStack")) {
        n = "OpenStack";
        EVIDENCE(product_name);
    } else if (has(d->sys_vendor, "VMware")) {
        n = "VMware";
        EVIDENCE(sys_vendor);
    } else if (has(d->sys_vendor, "QEMU")) {
        n = "QEMU (no cloud identified)";
        EVIDENCE(sys_vendor);
    }
#undef EVIDENCE
    copy_str(name, size, n);
    copy_str(evidence, esize, ev);
}

/* ---- processes ------------------------------------------------------------ */

const char *sync_daemon_name(const char *comm)
{
    static const struct { const char *comm, *name; } known[] = {
        {"chronyd", "chronyd"},
        {"ntpd", "ntpd"},
        {"openntpd", "openntpd"},
        {"systemd-timesyn", "systemd-timesyncd"}, /* comm is cut at 15 characters */
        {"systemd-timesyncd", "systemd-timesyncd"},
        {"ptp4l", "ptp4l"},
        {"phc2sys", "phc2sys"},
        {"timemaster", "timemaster"},
        {"ntpsec", "ntpd"},
        {"vmtoolsd", "vmtoolsd"},
    };
    for (unsigned i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(comm, known[i].comm) == 0)
            return known[i].name;
    return NULL;
}

/* ---- clocksources --------------------------------------------------------- */

enum vdso_cap clocksource_vdso_cap(const char *name)
{
    static const struct { const char *name; enum vdso_cap cap; } known[] = {
        {"tsc", VDSO_CAP_YES},
        {"arch_sys_counter", VDSO_CAP_YES},
        {"hyperv_clocksource_tsc_page", VDSO_CAP_YES},
        {"riscv_clocksource", VDSO_CAP_YES},
        {"kvm-clock", VDSO_CAP_IF_STABLE},
        {"xen", VDSO_CAP_IF_STABLE},
        {"hpet", VDSO_CAP_NO},
        {"acpi_pm", VDSO_CAP_NO},
        {"jiffies", VDSO_CAP_NO},
        {"refined-jiffies", VDSO_CAP_NO},
        {"pit", VDSO_CAP_NO},
        {"tsc-early", VDSO_CAP_NO},
        {"hyperv_clocksource_msr", VDSO_CAP_NO},
        {"timebase", VDSO_CAP_YES},
        {"s390-tod", VDSO_CAP_YES},
    };
    if (!name || !*name)
        return VDSO_CAP_UNKNOWN;
    for (unsigned i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(name, known[i].name) == 0)
            return known[i].cap;
    return VDSO_CAP_UNKNOWN;
}

const char *vdso_cap_name(enum vdso_cap c)
{
    switch (c) {
    case VDSO_CAP_YES: return "yes";
    case VDSO_CAP_IF_STABLE: return "if-stable";
    case VDSO_CAP_NO: return "no";
    default: return "unknown";
    }
}

/* ---- fixture key files ---------------------------------------------------- */

int kv_parse(const char *text, struct kv_file *kv, char *err, size_t esize)
{
    kv->n = 0;
    int lineno = 0;
    const char *p = text;
    while (p && *p) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) : strlen(p);
        char line[640];
        lineno++;
        if (n >= sizeof line) {
            snprintf(err, esize, "line %d is longer than %zu characters", lineno, sizeof line - 1);
            return -1;
        }
        memcpy(line, p, n);
        line[n] = 0;
        p = eol ? eol + 1 : NULL;
        trim(line);
        if (!line[0] || line[0] == '#')
            continue;
        char *eq = strchr(line, '=');
        if (!eq) {
            snprintf(err, esize, "line %d: expected 'key = value', got '%s'", lineno, line);
            return -1;
        }
        *eq = 0;
        char *key = trim(line), *value = trim(eq + 1);
        if (!*key) {
            snprintf(err, esize, "line %d: empty key", lineno);
            return -1;
        }
        int slot = -1;
        for (int i = 0; i < kv->n; i++)
            if (strcmp(kv->item[i].key, key) == 0)
                slot = i;
        if (slot < 0) {
            if (kv->n >= KV_MAX) {
                snprintf(err, esize, "more than %d keys", KV_MAX);
                return -1;
            }
            slot = kv->n++;
        }
        copy_str(kv->item[slot].key, sizeof kv->item[slot].key, key);
        copy_str(kv->item[slot].value, sizeof kv->item[slot].value, value);
    }
    return 0;
}

const char *kv_get(const struct kv_file *kv, const char *key)
{
    for (int i = 0; i < kv->n; i++)
        if (strcmp(kv->item[i].key, key) == 0)
            return kv->item[i].value;
    return NULL;
}
