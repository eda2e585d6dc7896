#define _GNU_SOURCE
#include "benchrun.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "counter.h"
#include "cpu.h"
#include "fastclock.h"
#include "kernel.h"
#include "sysparse.h"
#include "util.h"

int bench_parse_threads(const char *s, int *out, int max, char *err, size_t esize)
{
    char seen[1025] = {0};
    const char *p = s;
    if (!*p) {
        snprintf(err, esize, "--threads needs a list such as 1,2,4 or 1-8");
        return -1;
    }
    while (*p) {
        char *end;
        if (!isdigit((unsigned char)*p))
            goto bad;
        errno = 0;
        long a = strtol(p, &end, 10), b = a;
        if (errno)
            goto bad;
        p = end;
        if (*p == '-') {
            p++;
            if (!isdigit((unsigned char)*p))
                goto bad;
            b = strtol(p, &end, 10);
            if (errno)
                goto bad;
            p = end;
        }
        if (a < 1 || b < 1) {
            snprintf(err, esize, "--threads: thread counts start at 1 (got %ld)", a < 1 ? a : b);
            return -1;
        }
        if (a > 1024 || b > 1024 || b < a) {
            snprintf(err, esize, "--threads: '%s' is out of range (1..1024, ranges ascending)", s);
            return -1;
        }
        for (long v = a; v <= b; v++)
            seen[v] = 1;
        if (*p == ',') {
            p++;
            if (!*p)
                goto bad;
        } else if (*p) {
            goto bad;
        }
    }
    int n = 0;
    for (int v = 1; v <= 1024; v++)
        if (seen[v]) {
            if (n == max) {
                snprintf(err, esize, "--threads: at most %d different thread counts", max);
                return -1;
            }
            out[n++] = v;
        }
    return n;
bad:
    snprintf(err, esize, "--threads: cannot read '%s' (expected a list such as 1,2,4 or 1-8)", s);
    return -1;
}

/* ---- sources by name ------------------------------------------------------ */

static int index_of(const struct bench_result *r, const char *key)
{
    for (int i = 0; i < r->nsrc; i++)
        if (strcmp(r->src[i].key, key) == 0)
            return r->src[i].usable ? i : -1;
    return -1;
}

/* ---- fastclock's state ---------------------------------------------------- */

static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

const char *bench_ordered_reads(const char *counter)
{
    return starts_with(counter, "clock_gettime") ? "kernel" : "counter";
}

const char *bench_unordered_reads(const char *counter)
{
    /* "clock_gettime (ordered), rdtsc (unordered)": the bare reads stay on the counter. */
    return !starts_with(counter, "clock_gettime") || strstr(counter, "(unordered)") ? "counter" : "kernel";
}

const char *bench_ordered_floor_key(const char *counter)
{
    /* The keys of src_counter's fenced rows are these instructions' names. */
    if (!FC_HAVE_COUNTER)
        return NULL;
    if (strcmp(counter, FC_COUNTER_INSN_ALT) == 0)
        return FC_COUNTER_INSN_ALT;
    if (strcmp(counter, FC_COUNTER_INSN_ORDERED) == 0)
        return FC_COUNTER_INSN_ORDERED;
    return NULL; /* the kernel's clock, or the shim's unordered default (no fenced read named) */
}

int bench_fc_changes(const struct bench_fc_state *a, const struct bench_fc_state *b, double reads, char *out,
                     size_t size)
{
    struct sbuf sb;
    sb_init(&sb, out, size);
    if (!a->known || !b->known)
        return 0;
    int n = 0;
    if (strcmp(a->mode, b->mode) != 0)
        sb_printf(&sb, "%smode %s -> %s", n++ ? "; " : "", a->mode, b->mode);
    if (strcmp(a->counter, b->counter) != 0)
        sb_printf(&sb, "%scounter %s -> %s", n++ ? "; " : "", a->counter, b->counter);
    if (strcmp(bench_ordered_reads(a->counter), bench_ordered_reads(b->counter)) != 0)
        sb_printf(&sb, "%sordered reads (fastclock_mono_ns) from the %s -> the %s", n++ ? "; " : "",
                  bench_ordered_reads(a->counter), bench_ordered_reads(b->counter));
    if (strcmp(bench_unordered_reads(a->counter), bench_unordered_reads(b->counter)) != 0)
        sb_printf(&sb, "%sunordered reads from the %s -> the %s", n++ ? "; " : "", bench_unordered_reads(a->counter),
                  bench_unordered_reads(b->counter));
    if (strcmp(a->real_source, b->real_source) != 0)
        sb_printf(&sb, "%sreal_source %s -> %s", n++ ? "; " : "", a->real_source, b->real_source);
    /* Fallback reads are the design where a line has run out while another
     * thread recalibrates (a late calibrator on a busy machine): a change
     * of read path only beyond 0.1% of the phase's fastclock reads, and
     * not counted where those reads are not known (the later phases). */
    if (b->fallback_reads > a->fallback_reads && reads > 0 &&
        (double)(b->fallback_reads - a->fallback_reads) > 1e-3 * reads) {
        uint64_t d = b->fallback_reads - a->fallback_reads;
        sb_printf(&sb, "%s%llu read%s answered by the kernel in mode tsc", n++ ? "; " : "", (unsigned long long)d,
                  d == 1 ? "" : "s");
        sb_printf(&sb, ", %.2g%% of ~%.*f %sfastclock reads", 100.0 * (double)d / reads, reads >= 1e3 ? 1 : 0,
                      reads >= 1e6 ? reads / 1e6 : reads >= 1e3 ? reads / 1e3 : reads,
                      reads >= 1e6 ? "M " : reads >= 1e3 ? "k " : "");
        sb_printf(&sb, " (fallback_reads %llu -> %llu)", (unsigned long long)a->fallback_reads,
                  (unsigned long long)b->fallback_reads);
    }
    return n;
}

void bench_take_state(struct bench_fc_state *x)
{
    struct fastclock_status st;
    memset(x, 0, sizeof *x);
    if (fastclock_status(&st) != 0)
        return;
    x->known = 1;
    copy_str(x->mode, sizeof x->mode, st.mode ? st.mode : "unknown");
    copy_str(x->calibrator, sizeof x->calibrator, st.calibrator ? st.calibrator : "unknown");
    copy_str(x->reason, sizeof x->reason, st.reason ? st.reason : "");
    copy_str(x->counter, sizeof x->counter, st.counter ? st.counter : "unknown");
    copy_str(x->real_source, sizeof x->real_source, st.real_source ? st.real_source : "unknown");
    x->real_line_ratio = st.real_line_ratio;
    x->fallback_reads = st.fallback_reads;
    x->forced = st.forced;
}

double bench_ticks_ns_per_tick(void)
{
    /* Over a billion ticks, so that a tick's fraction of a ns survives the
     * integer result (an exact 1 where ticks are ns). */
    int64_t ns = fastclock_ticks_to_ns(1000000000ULL);
    return ns > 0 ? (double)ns / 1e9 : NAN;
}

/* ---- the plan ------------------------------------------------------------ */

static void build_sources(struct bench_result *r)
{
    struct source *s = r->src;
    int n = 0;
    for (int w = 0; w < 3; w++)
        src_counter(&s[n++], w);
    for (int w = 0; w < FC_SRC_COUNT; w++)
        src_fastclock(&s[n++], w);
    for (int i = 0; i < src_nclocks; i++)
        src_clock_gettime(&s[n++], i);
    src_gettimeofday(&s[n++], 0);
    src_time(&s[n++], 0);
    src_syscall_clock_gettime(&s[n++], 1); /* CLOCK_MONOTONIC */
    src_gettimeofday(&s[n++], 1);
    r->nsrc = n;
    r->rdtsc = r->src[0].usable ? 0 : -1;
    r->cg_mono = index_of(r, "clock_gettime(CLOCK_MONOTONIC)");
    /* The floor of fastclock's ordered read: the fenced read the status
     * names (the cheaper one, chosen by counter.c), not a fixed one. */
    const char *floor = r->fc_start.known ? bench_ordered_floor_key(r->fc_start.counter) : NULL;
    r->ordered_floor = floor ? index_of(r, floor) : -1;
    if (r->ordered_floor >= 0)
        r->src[r->ordered_floor].note = "ordered read that fastclock_mono_ns uses here (status counter): its floor";

    /* Thread scaling: one of each kind, and the ones known to serialise
     * (HPET-backed clock_gettime, the process CPU clock). */
    static const char *const scale_keys[] = {
        "fastclock_mono_ns",
        "fastclock_mono_ns_unordered",
        "fastclock_mono_coarse_ns",
        "rdtsc",
        "cntvct_el0",
        "clock_gettime(CLOCK_MONOTONIC)",
        "clock_gettime(CLOCK_REALTIME)",
        "clock_gettime(CLOCK_MONOTONIC_COARSE)",
        "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)",
        "gettimeofday",
        "syscall(clock_gettime, CLOCK_MONOTONIC)",
    };
    r->nscale = 0;
    for (unsigned k = 0; k < sizeof scale_keys / sizeof scale_keys[0] && r->nscale < BENCH_MAX_SCALE; k++) {
        int i = index_of(r, scale_keys[k]);
        if (i >= 0)
            r->scale_src[r->nscale++] = i;
    }
}

static void describe_machine(struct bench_result *r)
{
    struct utsname u;
    if (uname(&u) == 0) {
        copy_str(r->arch, sizeof r->arch, u.machine);
        copy_str(r->kernel, sizeof r->kernel, u.release);
    }
    struct fc_cpu_info cpu;
    fc_cpu_probe(&cpu);
    size_t len;
    int err;
    char *text = read_file_alloc("", "/proc/cpuinfo", 8 << 20, &len, &err);
    struct cpuinfo ci;
    memset(&ci, 0, sizeof ci);
    if (text) {
        cpuinfo_parse(text, &ci);
        free(text);
    }
    copy_str(r->cpu, sizeof r->cpu, cpu.brand[0] ? cpu.brand : ci.model_name[0] ? ci.model_name : "unknown CPU");
    const char *hv = fc_hypervisor_name(cpu.hypervisor_sig);
    copy_str(r->hypervisor, sizeof r->hypervisor, hv ? hv : cpu.hypervisor ? "unrecognised hypervisor" : "");
    struct fc_clocksource_info cs;
    fc_clocksource_read("", &cs);
    copy_str(r->clocksource, sizeof r->clocksource, cs.current_errno ? "unknown" : cs.current);
    copy_str(r->available, sizeof r->available, cs.available_errno ? "unknown" : cs.available);
}

/* ---- progress ------------------------------------------------------------ */

struct progress_ctx {
    int on;
    int64_t start;
};

static void progress(const char *phase, int done, int total, void *ctx)
{
    struct progress_ctx *p = ctx;
    if (!p->on)
        return;
    fprintf(stderr, "\r\033[Kbench: %s %d/%d (%.1f s)", phase, done, total, (double)(mono_raw_ns() - p->start) / 1e9);
    fflush(stderr);
}

/* ---- the counter's rate over the run ------------------------------------- */


/* ---- running ------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void run_scaling(const struct bench_config *cfg, struct bench_result *r, struct progress_ctx *pc)
{
    int cpus[1024];
    r->cpus = src_allowed_cpus(cpus, 1024);
    int configs = r->nscale * r->nthreads;
    if (!configs)
        return;
    double budget = cfg->seconds * 0.5e9;
    /* Runs of 20 ms, at least 3 rounds; shorter runs only when the budget
     * cannot hold that (many thread counts). */
    r->scale_run_ns = 20e6;
    r->scale_rounds = (int)(budget / (configs * r->scale_run_ns));
    if (r->scale_rounds < 3) {
        r->scale_rounds = 3;
        r->scale_run_ns = budget / (configs * 3.0);
        if (r->scale_run_ns < 5e6)
            r->scale_run_ns = 5e6;
    }
    int rounds = r->scale_rounds;
    size_t cells = (size_t)configs * (size_t)rounds;
    double *cps = calloc(cells, sizeof *cps), *npc = calloc(cells, sizeof *npc), *wall = calloc(cells, sizeof *wall);
    int *got = calloc((size_t)configs, sizeof *got);
    if (!cps || !npc || !wall || !got) {
        free(cps);
        free(npc);
        free(wall);
        free(got);
        return;
    }
    int stuck = 0;
    for (int round = 0; round < rounds && !stuck; round++) {
        for (int t = 0; t < r->nthreads && !stuck; t++)
            for (int k = 0; k < r->nscale && !stuck; k++) {
                int c = k * r->nthreads + t;
                struct scale_sample x;
                int got_one = src_scale(&r->src[r->scale_src[k]], r->threads[t], cpus, r->cpus, r->scale_run_ns, &x);
                if (got_one == 0) {
                    cps[c * rounds + got[c]] = x.calls_per_s;
                    npc[c * rounds + got[c]] = x.ns_per_call;
                    wall[c * rounds + got[c]] = x.wall_calls_per_s;
                    got[c]++;
                } else if (got_one == SRC_SCALE_STUCK) {
                    /* Every later point would wait as long: the rest is not measured. */
                    fprintf(stderr, "fastclock bench: a thread-scaling worker never got its CPU in 2 s (a real-time "
                                    "task busy there?): thread scaling stops here\n");
                    stuck = 1;
                }
            }
        progress("thread scaling round", round + 1, rounds, pc);
    }
    /* The rounds that ran, where scaling stopped early (the planned count
     * would be printed as each median's). */
    r->scale_rounds = 0;
    for (int c = 0; c < configs; c++)
        if (got[c] > r->scale_rounds)
            r->scale_rounds = got[c];
    for (int k = 0; k < r->nscale; k++)
        for (int t = 0; t < r->nthreads; t++) {
            int c = k * r->nthreads + t;
            struct bench_point *p = &r->point[k][t];
            p->ok = got[c] > 0;
            if (!p->ok)
                continue;
            double *v = cps + c * rounds;
            p->calls_per_s = median_of(v, got[c]); /* sorts v */
            p->min_calls_per_s = v[0];
            p->max_calls_per_s = v[got[c] - 1];
            p->ns_per_call = median_of(npc + c * rounds, got[c]);
            p->wall_calls_per_s = median_of(wall + c * rounds, got[c]);
        }
    free(cps);
    free(npc);
    free(wall);
    free(got);
}

void bench_run(const struct bench_config *cfg, struct bench_result *r)
{
    memset(r, 0, sizeof *r);
    struct progress_ctx pc = {cfg->progress, mono_raw_ns()};
    memcpy(r->threads, cfg->threads, sizeof r->threads);
    r->nthreads = cfg->nthreads;

    /* Settle fastclock first: the mode decision and the calibrator's
     * first lines must not land inside a measured batch. */
    (void)fastclock_mono_ns();
    (void)fastclock_mono_coarse_ns();
    struct timespec nap = {0, 20000000};
    nanosleep(&nap, NULL);

    describe_machine(r);
    /* What the fastclock rows will measure: taken again after the cost
     * phase and at the end; a change is reported (bench_fc_changes). */
    bench_take_state(&r->fc_start);
    copy_str(r->fc_mode, sizeof r->fc_mode, r->fc_start.mode);
    copy_str(r->fc_calibrator, sizeof r->fc_calibrator, r->fc_start.calibrator);
    copy_str(r->fc_reason, sizeof r->fc_reason, r->fc_start.reason);
    build_sources(r);
    uint64_t t0 = 0, t1 = 0;
    int64_t n0 = 0, n1 = 0;
    if (FC_HAVE_COUNTER)
        counter_pair(&t0, &n0);

    r->batch_ns = cfg->seconds < 1 ? 250e3 : 1e6;
    src_measure(r->src, r->nsrc, cfg->seconds * 0.5, r->batch_ns, 5, progress, &pc);
    r->cost_rounds = r->src[r->cg_mono >= 0 ? r->cg_mono : 0].count;
    bench_take_state(&r->fc_after_cost);

    run_scaling(cfg, r, &pc);

    if (FC_HAVE_COUNTER) {
        counter_pair(&t1, &n1);
        if (n1 > n0 && t1 > t0)
            r->counter_hz = (double)(t1 - t0) * 1e9 / (double)(n1 - n0);
    }
    r->ticks_ns_per_tick = bench_ticks_ns_per_tick();
    double ticks_hz = r->ticks_ns_per_tick > 0 ? 1e9 / r->ticks_ns_per_tick : NAN;
    int ti = index_of(r, "fastclock_ticks");
    if (ti >= 0 && r->ticks_ns_per_tick > 0)
        r->src[ti].note = r->ticks_ns_per_tick == 1.0
                              ? "ns of CLOCK_MONOTONIC here (the unit was fixed when the mode was decided)"
                              : "counter ticks here, for intervals in one thread (fastclock_ticks_to_ns converts)";
    for (int i = 0; i < r->nsrc; i++) {
        struct source *s = &r->src[i];
        int is_fc_ticks = strcmp(s->key, "fastclock_ticks") == 0;
        double window = s->unit == UNIT_S ? 1.1e9 : 25e6;
        src_step(s, window, is_fc_ticks ? ticks_hz : r->counter_hz);
        progress("granularity", i + 1, r->nsrc, &pc);
    }
    bench_take_state(&r->fc_end);
    /* The fastclock reads of the cost phase's batches (its calibration
     * and warm-up add a few): what fallback reads are a share of. */
    double reads = 0;
    for (int i = 0; i < r->nsrc; i++)
        if (r->src[i].group == GROUP_FASTCLOCK)
            reads += (double)r->src[i].count * (double)r->src[i].n;
    bench_fc_changes(&r->fc_start, &r->fc_after_cost, reads, r->fc_changed_cost, sizeof r->fc_changed_cost);
    bench_fc_changes(&r->fc_after_cost, &r->fc_end, 0, r->fc_changed_later, sizeof r->fc_changed_later);
    struct fc_clocksource_info cs;
    fc_clocksource_read("", &cs);
    copy_str(r->clocksource_end, sizeof r->clocksource_end, cs.current_errno ? "unknown" : cs.current);
    r->elapsed_s = (double)(mono_raw_ns() - pc.start) / 1e9;
    if (pc.on)
        fprintf(stderr, "\r\033[K");
}

void bench_free(struct bench_result *r) { src_free(r->src, r->nsrc); }

double bench_ratio(const struct bench_result *r, int i, int ref)
{
    if (ref < 0 || isnan(r->src[i].median) || isnan(r->src[ref].median) || r->src[ref].median <= 0)
        return NAN;
    return r->src[i].median / r->src[ref].median;
}

double bench_scaling(const struct bench_result *r, int k)
{
    if (r->nthreads < 2 || !r->point[k][0].ok || !r->point[k][r->nthreads - 1].ok || r->threads[0] != 1)
        return NAN;
    return r->point[k][r->nthreads - 1].calls_per_s / r->point[k][0].calls_per_s;
}
