/* Captures: a directory that stands in for another machine.
 *
 *   DIR/proc/cpuinfo, DIR/proc/cmdline, DIR/proc/sys/kernel/osrelease,
 *   DIR/sys/devices/system/clocksource/clocksource0/{current,available}_clocksource,
 *   DIR/sys/class/dmi/id/FIELD, DIR/proc/PID/comm  read by probe_files()
 *   DIR/dev/kmsg                                    the kernel log, as text
 *   DIR/doctor-facts                                what files cannot hold:
 *       CPUID, auxv, adjtimex, and the measurements, as "key = value"
 *
 * `fastclock doctor --capture DIR` writes one from the running machine;
 * docs/cli.md lists the keys. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/timex.h>
#include <unistd.h>

#include "cpu.h"
#include "kernel.h"
#include "probe.h"

/* ---- loading -------------------------------------------------------------- */

struct loader {
    const struct kv_file *kv;
    char *err;
    size_t esize;
    int failed;
    unsigned char used[KV_MAX];
};

static const char *get(struct loader *l, const char *key)
{
    for (int i = 0; i < l->kv->n; i++)
        if (strcmp(l->kv->item[i].key, key) == 0) {
            l->used[i] = 1;
            return l->kv->item[i].value;
        }
    return NULL;
}

static void bad(struct loader *l, const char *key, const char *v, const char *what)
{
    if (!l->failed)
        snprintf(l->err, l->esize, "doctor-facts: %s = '%s' is not %s", key, v, what);
    l->failed = 1;
}

static int get_double(struct loader *l, const char *key, double *out)
{
    const char *v = get(l, key);
    if (!v)
        return 0;
    if (parse_double(v, out) != 0) {
        bad(l, key, v, "a number");
        return 0;
    }
    return 1;
}

static int get_long(struct loader *l, const char *key, long *out)
{
    const char *v = get(l, key);
    if (!v)
        return 0;
    if (parse_long(v, out) != 0) {
        bad(l, key, v, "an integer");
        return 0;
    }
    return 1;
}

/* 0/1/unknown (empty or "unknown") */
static int get_tri(struct loader *l, const char *key, int *out)
{
    const char *v = get(l, key);
    if (!v)
        return 0;
    if (strcmp(v, "1") == 0 || strcmp(v, "yes") == 0 || strcmp(v, "true") == 0)
        *out = TRI_YES;
    else if (strcmp(v, "0") == 0 || strcmp(v, "no") == 0 || strcmp(v, "false") == 0)
        *out = TRI_NO;
    else if (!*v || strcmp(v, "unknown") == 0)
        *out = TRI_UNKNOWN;
    else {
        bad(l, key, v, "0, 1 or unknown");
        return 0;
    }
    return 1;
}

static void get_str(struct loader *l, const char *key, char *dst, size_t size)
{
    const char *v = get(l, key);
    if (v)
        copy_str(dst, size, v);
}

static void load_cpu(struct doctor_facts *f, struct loader *l)
{
    long v;
    double d;
    get_str(l, "arch", f->arch, sizeof f->arch);
    if (!f->arch[0])
        copy_str(f->arch, sizeof f->arch, f->cpuinfo.is_arm ? "aarch64" : "x86_64");
    f->cpus = f->cpuinfo.processors;
    if (get_long(l, "cpus", &v))
        f->cpus = (int)v;

    get_str(l, "cpuid.vendor", f->vendor, sizeof f->vendor);
    get_str(l, "cpuid.brand", f->model, sizeof f->model);
    f->has_cpuid = f->vendor[0] != 0;
    if (!f->vendor[0])
        copy_str(f->vendor, sizeof f->vendor, f->cpuinfo.is_arm ? "ARM" : f->cpuinfo.vendor_id);
    if (!f->model[0])
        copy_str(f->model, sizeof f->model, f->cpuinfo.model_name);
    if (get_long(l, "cpuid.family", &v))
        f->family = (unsigned)v;
    if (get_long(l, "cpuid.model", &v))
        f->model_number = (unsigned)v;
    if (get_tri(l, "cpuid.invariant_tsc", &f->invariant_tsc))
        copy_str(f->invariant_source, sizeof f->invariant_source, "CPUID 0x80000007 EDX[8]");
    get_tri(l, "cpuid.rdtscp", &f->has_rdtscp);
    get_tri(l, "cpuid.hypervisor", &f->hypervisor);
    get_str(l, "cpuid.hypervisor_signature", f->hv_signature, sizeof f->hv_signature);
    if (get_long(l, "cpuid.hypervisor_max_leaf", &v))
        f->hv_max_leaf = (uint32_t)v;
    if (get_double(l, "cpuid.tsc_hz", &d))
        f->cpuid_tsc_hz = d;
    get_str(l, "cpuid.tsc_hz_source", f->cpuid_tsc_source, sizeof f->cpuid_tsc_source);
    if (f->hv_signature[0]) {
        const char *hv = fc_hypervisor_name(f->hv_signature);
        copy_str(f->hv_name, sizeof f->hv_name, hv ? hv : "unrecognised");
        if (f->hypervisor == TRI_UNKNOWN)
            f->hypervisor = TRI_YES;
    }

    /* Without CPUID facts, what Linux derived from CPUID: it sets both
     * constant_tsc and nonstop_tsc from the invariant bit. */
    if (f->invariant_tsc == TRI_UNKNOWN) {
        if (strcmp(f->arch, "aarch64") == 0) {
            f->invariant_tsc = TRI_YES;
            copy_str(f->invariant_source, sizeof f->invariant_source, "architecture (generic timer)");
        } else if (!f->cpuinfo_err) {
            f->invariant_tsc = f->flag[0] == TRI_YES && f->flag[1] == TRI_YES ? TRI_YES : TRI_NO;
            copy_str(f->invariant_source, sizeof f->invariant_source, "cpuinfo flags constant_tsc+nonstop_tsc");
        }
    }
    if (f->has_rdtscp == TRI_UNKNOWN && !f->cpuinfo_err && !f->cpuinfo.is_arm)
        f->has_rdtscp = f->flag[2];
    if (f->hypervisor == TRI_UNKNOWN && !f->cpuinfo_err && !f->cpuinfo.is_arm)
        f->hypervisor = fc_word_in_list(f->cpuinfo.flags, "hypervisor") ? TRI_YES : TRI_NO;
}

static void load_sync(struct doctor_facts *f, struct loader *l)
{
    long state, status = 0, v;
    if (!get_long(l, "adjtimex.return", &state)) {
        copy_str(f->sync_err, sizeof f->sync_err, "not in the capture");
        return;
    }
    struct timex tx;
    memset(&tx, 0, sizeof tx);
    get_long(l, "adjtimex.status", &status);
    tx.status = (int)status;
    if (get_long(l, "adjtimex.maxerror", &v)) tx.maxerror = v;
    if (get_long(l, "adjtimex.esterror", &v)) tx.esterror = v;
    if (get_long(l, "adjtimex.offset", &v)) tx.offset = v;
    if (get_long(l, "adjtimex.freq", &v)) tx.freq = v;
    if (get_long(l, "adjtimex.tai", &v)) tx.tai = (int)v;
    facts_set_adjtimex(f, &tx, (int)state);
}

static void load_measurements(struct doctor_facts *f, struct loader *l)
{
    double d;
    long v;
    const char *s;
    if (get_double(l, "measured.tsc_hz", &d)) {
        f->measured_tsc_hz = d;
        f->measured_err[0] = 0;
    } else {
        copy_str(f->measured_err, sizeof f->measured_err, "not in the capture");
    }
    get_tri(l, "auxv.vdso", &f->vdso_present);

    if (get_long(l, "warp.max_cycles", &v)) {
        f->warp_ran = 1;
        f->warp_err[0] = 0;
        f->warp_max_cycles = v;
        if (get_long(l, "warp.pairs", &v)) f->warp_pairs = (int)v;
        if (get_long(l, "warp.pairs_skipped", &v)) f->warp_pairs_skipped = (int)v;
        if (get_long(l, "warp.iterations", &v)) f->warp_iterations = (uint64_t)v;
        if (get_long(l, "warp.warps", &v)) f->warp_count = (uint64_t)v;
        if (get_long(l, "warp.cpu_a", &v)) f->warp_cpu_a = (int)v;
        if (get_long(l, "warp.cpu_b", &v)) f->warp_cpu_b = (int)v;
        if (get_long(l, "warp.pairs_unpinned", &v)) f->warp_pairs_unpinned = (int)v;
        if ((s = get(l, "warp.insn"))) copy_str(f->warp_insn, sizeof f->warp_insn, s);
    } else if ((s = get(l, "warp.error"))) {
        copy_str(f->warp_err, sizeof f->warp_err, s);
        if (get_long(l, "warp.pairs", &v)) f->warp_pairs = (int)v;
        if (get_long(l, "warp.pairs_skipped", &v)) f->warp_pairs_skipped = (int)v;
        if (get_long(l, "warp.pairs_unpinned", &v)) f->warp_pairs_unpinned = (int)v;
    } else {
        copy_str(f->warp_err, sizeof f->warp_err, "not in the capture");
    }

    if ((s = get(l, "seccomp"))) {
        if (strcmp(s, "ok") == 0) {
            f->seccomp_ok = TRI_YES;
            f->seccomp_err[0] = 0;
        } else {
            f->seccomp_ok = TRI_NO;
            copy_str(f->seccomp_err, sizeof f->seccomp_err, s);
        }
    }
    for (int i = 0; i < FACT_NCALLS; i++) {
        struct clock_fact *c = &f->call[i];
        char key[96];
#define KEY(field) (snprintf(key, sizeof key, "clock.%s." field, c->name), key)
        get_tri(l, KEY("supported"), &c->supported);
        if (get_double(l, KEY("libc_ns"), &d)) c->libc_ns = d;
        if (get_double(l, KEY("syscall_ns"), &d)) c->syscall_ns = d;
        if (get_tri(l, KEY("enters_kernel"), &c->enters_kernel))
            copy_str(c->verdict, sizeof c->verdict,
                     c->enters_kernel == TRI_UNKNOWN ? "unknown in the capture" : "from the capture");
        if (get_double(l, KEY("res_ns"), &d)) c->res_ns = d;
        if (get_double(l, KEY("step_ns"), &d)) c->step_ns = d;
#undef KEY
        if (c->supported == TRI_UNKNOWN && !isnan(c->libc_ns))
            c->supported = TRI_YES;
    }

    if ((s = get(l, "fastclock.mode"))) {
        f->fc_known = 1;
        copy_str(f->fc_mode, sizeof f->fc_mode, s);
        get_str(l, "fastclock.reason", f->fc_reason, sizeof f->fc_reason);
        if (get_long(l, "fastclock.forced", &v)) f->fc_forced = v != 0;
        get_str(l, "fastclock.calibrator", f->fc_calibrator, sizeof f->fc_calibrator);
        get_str(l, "fastclock.counter", f->fc_counter, sizeof f->fc_counter);
        if (get_double(l, "fastclock.counter_hz", &d)) f->fc_counter_hz = d;
        if (get_long(l, "fastclock.error_bound_ns", &v)) f->fc_error_bound_ns = v;
        if (get_double(l, "fastclock.ns_per_call", &d)) f->fc_ns = d;
        if (get_double(l, "fastclock.ns_per_call_unordered", &d)) f->fc_unordered_ns = d;
        if (get_double(l, "fastclock.ns_per_call_coarse", &d)) f->fc_coarse_ns = d;
        if (get_double(l, "fastclock.ns_per_call_gettime", &d)) f->fc_gettime_ns = d;
    }
}

int fixture_load(struct doctor_facts *f, const char *root, char *err, size_t esize)
{
    struct stat st;
    if (stat(root, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err, esize, "--root %s: %s", root, stat(root, &st) != 0 ? strerror(errno) : "not a directory");
        return -1;
    }
    f->live = 0;
    copy_str(f->root, sizeof f->root, root);

    size_t len;
    int e;
    char *log = read_file_alloc(root, "/dev/kmsg", 16 << 20, &len, &e);
    if (log) {
        klog_parse(log, &f->klog);
        f->klog_readable = 1;
        f->klog_err = 0;
        copy_str(f->klog_source, sizeof f->klog_source, "capture (dev/kmsg)");
        free(log);
    } else {
        f->klog_err = e;
        copy_str(f->klog_source, sizeof f->klog_source, "capture (dev/kmsg)");
    }

    static struct kv_file kv; /* large: keep it off the stack */
    char *text = read_file_alloc(root, FIXTURE_FACTS_FILE, 1 << 20, &len, &e);
    if (text) {
        char perr[200];
        int r = kv_parse(text, &kv, perr, sizeof perr);
        free(text);
        if (r != 0) {
            snprintf(err, esize, "%s%s: %s", root, FIXTURE_FACTS_FILE, perr);
            return -1;
        }
    } else {
        /* Every capture has one (--capture writes it, empty at worst): without
         * it DIR is not a capture, and every fact would silently be unknown. */
        snprintf(err, esize, "%s%s: %s (not a capture: `fastclock doctor --capture DIR` writes one)", root,
                 FIXTURE_FACTS_FILE, fc_errno_text(e));
        return -1;
    }
    struct loader l = {.kv = &kv, .err = err, .esize = esize};
    load_cpu(f, &l);
    load_sync(f, &l);
    load_measurements(f, &l);
    if (l.failed)
        return -1;
    for (int i = 0; i < kv.n; i++)
        if (!l.used[i]) {
            snprintf(err, esize, "%s%s: unknown key '%s'", root, FIXTURE_FACTS_FILE, kv.item[i].key);
            return -1;
        }
    return 0;
}

/* ---- writing a capture ---------------------------------------------------- */

static int mkdirs(const char *path)
{
    char tmp[1024];
    copy_str(tmp, sizeof tmp, path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return -1;
    return 0;
}

static int write_file(const char *dir, const char *rel, const char *text, char *err, size_t esize)
{
    char path[1024], parent[1024];
    snprintf(path, sizeof path, "%s%s", dir, rel);
    copy_str(parent, sizeof parent, path);
    char *slash = strrchr(parent, '/');
    if (slash)
        *slash = 0;
    if (mkdirs(parent) != 0) {
        snprintf(err, esize, "cannot create %s: %s", parent, strerror(errno));
        return -1;
    }
    FILE *out = fopen(path, "w");
    if (!out) {
        snprintf(err, esize, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    fputs(text, out);
    if (text[0] && text[strlen(text) - 1] != '\n')
        fputc('\n', out);
    if (fclose(out) != 0) {
        snprintf(err, esize, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Copies a live file into the capture if it is readable. */
static int copy_live(const char *dir, const char *rel, char *err, size_t esize)
{
    size_t len;
    int e;
    char *text = read_file_alloc("", rel, 16 << 20, &len, &e);
    if (!text)
        return 0;
    int r = write_file(dir, rel, text, err, esize);
    free(text);
    return r;
}

static void put_double(FILE *o, const char *key, double v)
{
    if (!isnan(v))
        fprintf(o, "%s = %.3f\n", key, v);
}

/* A tri-state as get_tri reads it back. */
static const char *tri_word(int t)
{
    return t == TRI_UNKNOWN ? "unknown" : t ? "1" : "0";
}

int capture_write(const struct doctor_facts *f, const char *dir, char *err, size_t esize)
{
    static const char *const files[] = {
        "/proc/cpuinfo", "/proc/cmdline", "/proc/sys/kernel/osrelease",
        FC_CLOCKSOURCE_DIR "/current_clocksource", FC_CLOCKSOURCE_DIR "/available_clocksource",
        "/sys/class/dmi/id/sys_vendor", "/sys/class/dmi/id/product_name", "/sys/class/dmi/id/bios_vendor",
        "/sys/class/dmi/id/bios_version", "/sys/class/dmi/id/chassis_asset_tag", "/sys/class/dmi/id/board_vendor",
    };
    if (mkdirs(dir) != 0) {
        snprintf(err, esize, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    for (unsigned i = 0; i < sizeof files / sizeof files[0]; i++)
        if (copy_live(dir, files[i], err, esize) != 0)
            return -1;
    /* The daemons as processes with made-up ids (their comm is what counts). */
    char daemons[sizeof f->daemons];
    copy_str(daemons, sizeof daemons, f->daemons);
    int pid = 400;
    for (char *save, *w = strtok_r(daemons, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        char rel[64], comm[16];
        snprintf(rel, sizeof rel, "/proc/%d/comm", pid++);
        copy_str(comm, sizeof comm, w); /* the kernel cuts comm at 15 characters */
        if (write_file(dir, rel, comm, err, esize) != 0)
            return -1;
    }

    char path[1024];
    snprintf(path, sizeof path, "%s%s", dir, FIXTURE_FACTS_FILE);
    FILE *o = fopen(path, "w");
    if (!o) {
        snprintf(err, esize, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    fprintf(o, "# fastclock doctor capture: what files cannot hold (CPUID, auxv, adjtimex, measurements).\n");
    fprintf(o, "arch = %s\ncpus = %d\n", f->arch, f->cpus);
    if (f->has_cpuid) {
        fprintf(o, "cpuid.vendor = %s\ncpuid.brand = %s\ncpuid.family = %u\ncpuid.model = %u\n", f->vendor, f->model,
                f->family, f->model_number);
        fprintf(o, "cpuid.invariant_tsc = %s\ncpuid.rdtscp = %s\ncpuid.hypervisor = %s\n", tri_word(f->invariant_tsc),
                tri_word(f->has_rdtscp), tri_word(f->hypervisor));
        if (f->hv_signature[0])
            fprintf(o, "cpuid.hypervisor_signature = %s\ncpuid.hypervisor_max_leaf = 0x%x\n", f->hv_signature,
                    f->hv_max_leaf);
        if (f->cpuid_tsc_hz > 0)
            fprintf(o, "cpuid.tsc_hz = %.0f\ncpuid.tsc_hz_source = %s\n", f->cpuid_tsc_hz, f->cpuid_tsc_source);
    }
    if (f->vdso_present != TRI_UNKNOWN)
        fprintf(o, "auxv.vdso = %d\n", f->vdso_present);
    if (f->sync_known) {
        int nano = (f->sync_status & STA_NANO) != 0;
        fprintf(o, "adjtimex.return = %d\nadjtimex.status = 0x%lx\nadjtimex.maxerror = %lld\n", f->sync_state,
                f->sync_status, (long long)f->maxerror_us);
        fprintf(o, "adjtimex.esterror = %lld\nadjtimex.offset = %.0f\nadjtimex.freq = %.0f\nadjtimex.tai = %d\n",
                (long long)f->esterror_us, nano ? f->offset_ns : f->offset_ns / 1000, f->freq_ppm * 65536.0,
                f->tai_offset_s);
    }
    if (f->measured_tsc_hz > 0)
        fprintf(o, "measured.tsc_hz = %.17g\n", f->measured_tsc_hz); /* exact: the report derives ppm from it */
    if (f->warp_ran)
        fprintf(o,
                "warp.max_cycles = %lld\nwarp.pairs = %d\nwarp.pairs_skipped = %d\nwarp.iterations = %llu\n"
                "warp.warps = %llu\nwarp.cpu_a = %d\nwarp.cpu_b = %d\nwarp.pairs_unpinned = %d\n",
                (long long)f->warp_max_cycles, f->warp_pairs, f->warp_pairs_skipped,
                (unsigned long long)f->warp_iterations, (unsigned long long)f->warp_count, f->warp_cpu_a,
                f->warp_cpu_b, f->warp_pairs_unpinned);
    if (f->warp_ran && f->warp_insn[0])
        fprintf(o, "warp.insn = %s\n", f->warp_insn);
    else if (f->warp_err[0]) /* why it found no verdict, and how far it got */
        fprintf(o, "warp.error = %s\nwarp.pairs = %d\nwarp.pairs_skipped = %d\nwarp.pairs_unpinned = %d\n",
                f->warp_err, f->warp_pairs, f->warp_pairs_skipped, f->warp_pairs_unpinned);
    if (f->seccomp_ok != TRI_UNKNOWN)
        fprintf(o, "seccomp = %s\n", f->seccomp_ok == TRI_YES ? "ok" : f->seccomp_err);
    for (int i = 0; i < FACT_NCALLS; i++) {
        const struct clock_fact *c = &f->call[i];
        char key[96];
        snprintf(key, sizeof key, "clock.%s.supported", c->name);
        fprintf(o, "%s = %s\n", key, tri_word(c->supported));
#define PUT(field, v) (snprintf(key, sizeof key, "clock.%s." field, c->name), put_double(o, key, v))
        PUT("libc_ns", c->libc_ns);
        PUT("syscall_ns", c->syscall_ns);
        PUT("res_ns", c->res_ns);
        PUT("step_ns", c->step_ns);
#undef PUT
        snprintf(key, sizeof key, "clock.%s.enters_kernel", c->name);
        fprintf(o, "%s = %s\n", key, tri_word(c->enters_kernel));
    }
    if (f->fc_known) {
        fprintf(o, "fastclock.mode = %s\nfastclock.reason = %s\nfastclock.calibrator = %s\nfastclock.counter = %s\n",
                f->fc_mode, f->fc_reason, f->fc_calibrator, f->fc_counter);
        put_double(o, "fastclock.counter_hz", f->fc_counter_hz);
        fprintf(o, "fastclock.forced = %d\nfastclock.error_bound_ns = %lld\n", f->fc_forced,
                (long long)f->fc_error_bound_ns);
        put_double(o, "fastclock.ns_per_call", f->fc_ns);
        put_double(o, "fastclock.ns_per_call_unordered", f->fc_unordered_ns);
        put_double(o, "fastclock.ns_per_call_coarse", f->fc_coarse_ns);
        put_double(o, "fastclock.ns_per_call_gettime", f->fc_gettime_ns);
    }
    if (fclose(o) != 0) {
        snprintf(err, esize, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }

    /* The kernel log, if this user may read it. */
    int e;
    char source[48];
    char *log = klog_read_live(&e, source, sizeof source);
    if (log) {
        int r = write_file(dir, "/dev/kmsg", log, err, esize);
        free(log);
        if (r != 0)
            return -1;
    }
    return 0;
}
