/* fastclock bench: every way of reading the time, side by side, in one run.
 *
 *   fastclock bench [--json|--csv] [--threads LIST] [--seconds S] [--svg FILE]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "benchrun.h"
#include "commands.h"
#include "fastclock.h"
#include "json.h"
#include "svg.h"
#include "util.h"

#define BENCH_SCHEMA_VERSION 1

static void usage(FILE *f)
{
    fprintf(f, "usage: fastclock bench [--json|--csv] [--threads LIST] [--seconds S] [--svg FILE]\n"
               "\n"
               "Measures every way to read the time on this machine in one interleaved run: ns per call\n"
               "(median, min, max over ~1 ms batches) with ratios to rdtsc and clock_gettime(CLOCK_MONOTONIC),\n"
               "thread scaling, and the smallest step of each clock.  fastclock is linked statically into this\n"
               "command (direct calls); fastclock-bench-core measures it through libfastclock.so.\n"
               "\n"
               "  --json          machine-readable results\n"
               "  --csv           one row per measurement\n"
               "  --threads LIST  thread counts for the scaling table, e.g. 1,2,4 or 1-8\n"
               "                  (default: 1 to the number of CPUs, doubling)\n"
               "  --seconds S     time for the cost and scaling measurements, 0.1 to 3600 (default 3);\n"
               "                  the granularity check adds about 1.5 s\n"
               "  --svg FILE      also write a chart of cost per call and thread scaling\n");
}

static int fail(const char *fmt, const char *arg)
{
    fprintf(stderr, "fastclock bench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(fastclock bench --help shows the options)\n");
    return 2;
}

static void default_threads(struct bench_config *c)
{
    int cpus[1024];
    int n = src_allowed_cpus(cpus, 1024);
    if (n < 1)
        n = 1;
    c->nthreads = 0;
    /* 1, 2, 4, ... and the CPU count itself. */
    for (int t = 1; t < n && c->nthreads < BENCH_MAX_THREADS - 1; t *= 2)
        c->threads[c->nthreads++] = t;
    c->threads[c->nthreads++] = n;
}

/* ---- text ---------------------------------------------------------------- */

static void num(char *buf, size_t size, double v, int decimals)
{
    if (isnan(v))
        snprintf(buf, size, "-");
    else
        snprintf(buf, size, "%.*f", decimals, v);
}

static void print_text(const struct bench_result *r)
{
    printf("fastclock %s bench\n", fastclock_version());
    printf("machine: %s, %d CPU%s available%s%s%s, %s, Linux %s\n", r->cpu, r->cpus, r->cpus == 1 ? "" : "s",
           r->hypervisor[0] ? " (" : "", r->hypervisor, r->hypervisor[0] ? " guest)" : "", r->arch, r->kernel);
    if (r->counter_hz > 0)
        printf("clocksource %s (available: %s); counter measured at %.3f MHz\n", r->clocksource, r->available,
               r->counter_hz / 1e6);
    else
        printf("clocksource %s (available: %s); counter rate not measured (no counter to read here)\n",
               r->clocksource, r->available);
    const struct bench_fc_state *fc = &r->fc_start;
    printf("fastclock mode %s%s (%s calibrator): %s\n", r->fc_mode, fc->forced ? ", forced by FASTCLOCK_MODE" : "",
           r->fc_calibrator, r->fc_reason);
    printf("fastclock reads (fastclock_status): counter %s; ordered reads from the %s, unordered from the %s;\n"
           "  real_source %s",
           fc->counter, bench_ordered_reads(fc->counter), bench_unordered_reads(fc->counter),
           strcmp(fc->real_source, "line") == 0   ? "line (the counter's line plus the kernel's offset)"
           : strcmp(fc->real_source, "vdso") == 0 ? "vdso (the kernel's own clock_gettime)"
                                                  : fc->real_source);
    if (fc->real_line_ratio > 0)
        printf("; timed with the first line: the kernel's REALTIME %.4fx the line's (the line answers at 1.04x)",
               fc->real_line_ratio);
    printf("\n");
    if (strcmp(bench_ordered_reads(fc->counter), "kernel") == 0)
        printf("NOTE: the kernel's clock answers fastclock_mono_ns here: its row measures clock_gettime through\n"
               "  fastclock, not a counter read\n");
    /* BENCH_LINKAGE: "static" (cli/CMakeLists.txt links fastclock_internal). */
    printf("linkage: fastclock is linked statically into this command, so its calls are direct while libc's go\n"
           "  through the PLT; a program linked with libfastclock.so pays one PLT jump more per call\n"
           "  (fastclock-bench-core measures through the .so)\n");
    if (strcmp(r->clocksource, r->clocksource_end) != 0)
        printf("WARNING: the clocksource changed during the run (%s, then %s): the figures mix both\n",
               r->clocksource, r->clocksource_end);
    if (r->fc_changed_cost[0])
        printf("WARNING: fastclock changed during the cost phase, so its figures mix two read paths:\n  %s\n",
               r->fc_changed_cost);
    if (r->fc_changed_later[0])
        printf("WARNING: fastclock changed during thread scaling or granularity:\n  %s\n", r->fc_changed_later);
    printf("\n");

    printf("Cost per call: %d interleaved rounds of ~%.2g ms batches per source; ns per call\n", r->cost_rounds,
           r->batch_ns / 1e6);
    printf("  %-40s %8s %8s %8s %8s %8s %10s  %s\n", "source", "median", "min", "max", "x rdtsc", "x floor",
           "x clock_gt", "smallest step");
    static const char *const group_title[] = {"raw counter", "fastclock", "libc", "system call"};
    for (int g = 0; g < 4; g++) {
        printf("  %s\n", group_title[g]);
        for (int i = 0; i < r->nsrc; i++) {
            const struct source *s = &r->src[i];
            if ((int)s->group != g)
                continue;
            if (!s->usable) {
                printf("    %-38s unsupported here (%s)\n", s->key, strerror(s->err));
                continue;
            }
            char med[16], mn[16], mx[16], xr[16], xf[16], xc[16], step[48];
            num(med, sizeof med, s->median, 2);
            num(mn, sizeof mn, s->min, 2);
            num(mx, sizeof mx, s->max, 2);
            num(xr, sizeof xr, bench_ratio(r, i, r->rdtsc), 2);
            num(xf, sizeof xf, bench_ratio(r, i, r->ordered_floor), 2);
            num(xc, sizeof xc, bench_ratio(r, i, r->cg_mono), 2);
            if (isnan(s->step_native))
                snprintf(step, sizeof step, "none seen");
            else if (s->unit == UNIT_NS)
                format_ns(step, sizeof step, s->step_ns);
            else {
                char ns[24] = "";
                if (!isnan(s->step_ns))
                    format_ns(ns, sizeof ns, s->step_ns);
                snprintf(step, sizeof step, "%.0f %s%s%s%s", s->step_native, src_unit_name(s->unit),
                         ns[0] ? " (" : "", ns, ns[0] ? ")" : "");
            }
            printf("    %-38s %8s %8s %8s %8s %8s %10s  %s\n", s->key, med, mn, mx, xr, xf, xc, step);
        }
    }
    printf("  x rdtsc / x clock_gt: median over the median of the bare counter read (%s) / of\n"
           "  clock_gettime(CLOCK_MONOTONIC).\n", r->src[0].key);
    if (r->ordered_floor >= 0)
        printf("  x floor: median over the median of %s, the fenced read fastclock's ordered reads use here\n"
               "  (fastclock_status counter): the ordered read's floor.\n", r->src[r->ordered_floor].key);
    else
        printf("  x floor: none here: fastclock's ordered reads use no fenced counter read (counter %s).\n",
               r->fc_start.known ? r->fc_start.counter : "unknown");
    printf("  smallest step: smallest non-zero difference seen between consecutive reads (for fine clocks,\n"
           "  bounded by the cost of a call).\n");

    if (!r->nscale)
        return;
    printf("\nThread scaling: total calls per second (all threads) and ns per call in each thread;\n"
           "median of %d rounds of %.0f ms, threads pinned round-robin to %d CPU%s; costs from each thread's\n"
           "CPU time, so other processes competing for the CPUs do not count against a clock\n",
           r->scale_rounds, r->scale_run_ns / 1e6, r->cpus, r->cpus == 1 ? "" : "s");
    printf("  %-40s", "source");
    for (int t = 0; t < r->nthreads; t++) {
        char h[32];
        snprintf(h, sizeof h, "%d thread%s", r->threads[t], r->threads[t] == 1 ? "" : "s");
        printf(" %19s", h);
    }
    printf("  scaling\n  %-40s", "");
    for (int t = 0; t < r->nthreads; t++)
        printf(" %10s %8s", "Mcalls/s", "ns/call");
    printf("\n");
    for (int k = 0; k < r->nscale; k++) {
        printf("  %-40s", r->src[r->scale_src[k]].key);
        for (int t = 0; t < r->nthreads; t++) {
            const struct bench_point *p = &r->point[k][t];
            if (p->ok)
                printf(" %10.1f %8.2f", p->calls_per_s / 1e6, p->ns_per_call);
            else
                printf(" %10s %8s", "-", "-");
        }
        double sc = bench_scaling(r, k);
        if (!isnan(sc)) {
            int ideal = r->threads[r->nthreads - 1] < r->cpus ? r->threads[r->nthreads - 1] : r->cpus;
            const char *word = sc >= 0.75 * ideal ? "scales" : sc < 1.3 ? "serialises" : "partly";
            printf("  x%.2f %s", sc, ideal > 1 ? word : "");
        }
        printf("\n");
    }
    if (r->nthreads > 1)
        printf("  scaling: calls/s at %d threads over calls/s at 1 thread (ideal x%d here).\n",
               r->threads[r->nthreads - 1],
               r->threads[r->nthreads - 1] < r->cpus ? r->threads[r->nthreads - 1] : r->cpus);
    printf("\nfinished in %.1f s\n", r->elapsed_s);
}

/* ---- JSON ---------------------------------------------------------------- */

/* The status fields that say what a fastclock row measured. */
static void write_fc_state(struct json *j, const struct bench_fc_state *x)
{
    json_string(j, "counter", x->counter);
    json_string(j, "ordered_reads", bench_ordered_reads(x->counter));
    json_string(j, "unordered_reads", bench_unordered_reads(x->counter));
    json_string(j, "real_source", x->real_source);
    json_double(j, "real_line_ratio", x->real_line_ratio, 4);
    json_uint(j, "fallback_reads", x->fallback_reads);
    json_bool(j, "forced", x->forced);
}

static void print_json(const struct bench_result *r, const struct bench_config *c)
{
    struct json j;
    json_init(&j, stdout);
    json_begin_object(&j, NULL);
    json_int(&j, "schema_version", BENCH_SCHEMA_VERSION);
    json_string(&j, "fastclock_version", fastclock_version());
    json_begin_object(&j, "machine");
    json_string(&j, "cpu", r->cpu);
    json_int(&j, "cpus", r->cpus);
    json_string(&j, "arch", r->arch);
    json_string(&j, "kernel", r->kernel);
    json_string(&j, "hypervisor", r->hypervisor[0] ? r->hypervisor : NULL);
    json_string(&j, "clocksource", r->clocksource);
    json_string(&j, "available_clocksources", r->available);
    json_string(&j, "clocksource_at_end", r->clocksource_end);
    json_double(&j, "counter_hz", r->counter_hz > 0 ? r->counter_hz : NAN, 0);
    json_end_object(&j);
    json_begin_object(&j, "fastclock");
    json_string(&j, "mode", r->fc_mode);
    json_string(&j, "calibrator", r->fc_calibrator);
    json_string(&j, "reason", r->fc_reason);
    write_fc_state(&j, &r->fc_start);
    json_string(&j, "linkage", BENCH_LINKAGE);
    json_string(&j, "ordered_floor", r->ordered_floor >= 0 ? r->src[r->ordered_floor].key : NULL);
    json_double(&j, "ticks_ns_per_tick", r->ticks_ns_per_tick > 0 ? r->ticks_ns_per_tick : NAN, 9);
    json_begin_object(&j, "after_cost");
    json_string(&j, "mode", r->fc_after_cost.mode);
    write_fc_state(&j, &r->fc_after_cost);
    json_end_object(&j);
    json_begin_object(&j, "at_end");
    json_string(&j, "mode", r->fc_end.mode);
    write_fc_state(&j, &r->fc_end);
    json_end_object(&j);
    json_begin_array(&j, "warnings");
    if (r->fc_changed_cost[0]) {
        char w[600];
        snprintf(w, sizeof w, "changed during the cost phase: %s", r->fc_changed_cost);
        json_string(&j, NULL, w);
    }
    if (r->fc_changed_later[0]) {
        char w[600];
        snprintf(w, sizeof w, "changed during thread scaling or granularity: %s", r->fc_changed_later);
        json_string(&j, NULL, w);
    }
    json_end_array(&j);
    json_end_object(&j);
    json_begin_object(&j, "config");
    json_double(&j, "seconds", c->seconds, 3);
    json_begin_array(&j, "threads");
    for (int t = 0; t < r->nthreads; t++)
        json_int(&j, NULL, r->threads[t]);
    json_end_array(&j);
    json_int(&j, "cost_rounds", r->cost_rounds);
    json_double(&j, "batch_ns", r->batch_ns, 0);
    json_int(&j, "scaling_rounds", r->scale_rounds);
    json_double(&j, "scaling_run_ns", r->scale_run_ns, 0);
    json_end_object(&j);

    json_begin_array(&j, "sources");
    for (int i = 0; i < r->nsrc; i++) {
        const struct source *s = &r->src[i];
        json_begin_object(&j, NULL);
        json_string(&j, "name", s->key);
        json_string(&j, "group", src_group_name(s->group));
        json_string(&j, "note", s->note);
        json_bool(&j, "usable", s->usable);
        json_string(&j, "error", s->usable ? NULL : strerror(s->err));
        json_double(&j, "median_ns", s->median, 3);
        json_double(&j, "min_ns", s->min, 3);
        json_double(&j, "max_ns", s->max, 3);
        json_int(&j, "batches", s->count);
        json_uint(&j, "calls_per_batch", s->n);
        json_double(&j, "x_rdtsc", bench_ratio(r, i, r->rdtsc), 3);
        json_double(&j, "x_clock_gettime_monotonic", bench_ratio(r, i, r->cg_mono), 3);
        json_double(&j, "x_ordered_floor", bench_ratio(r, i, r->ordered_floor), 3);
        json_double(&j, "step", s->step_native, 0);
        json_string(&j, "step_unit", src_unit_name(s->unit));
        json_double(&j, "step_ns", s->step_ns, 1);
        json_end_object(&j);
    }
    json_end_array(&j);

    json_begin_array(&j, "scaling");
    for (int k = 0; k < r->nscale; k++) {
        json_begin_object(&j, NULL);
        json_string(&j, "name", r->src[r->scale_src[k]].key);
        json_begin_array(&j, "points");
        for (int t = 0; t < r->nthreads; t++) {
            const struct bench_point *p = &r->point[k][t];
            json_begin_object(&j, NULL);
            json_int(&j, "threads", r->threads[t]);
            json_double(&j, "calls_per_s", p->ok ? p->calls_per_s : NAN, 0);
            json_double(&j, "ns_per_call", p->ok ? p->ns_per_call : NAN, 3);
            json_double(&j, "min_calls_per_s", p->ok ? p->min_calls_per_s : NAN, 0);
            json_double(&j, "max_calls_per_s", p->ok ? p->max_calls_per_s : NAN, 0);
            json_double(&j, "wall_calls_per_s", p->ok ? p->wall_calls_per_s : NAN, 0);
            json_end_object(&j);
        }
        json_end_array(&j);
        json_double(&j, "scaling", bench_scaling(r, k), 3);
        json_end_object(&j);
    }
    json_end_array(&j);
    json_double(&j, "elapsed_s", r->elapsed_s, 3);
    json_end_object(&j);
    json_finish(&j);
}

/* ---- CSV ----------------------------------------------------------------- */

static void csv_field(const char *s)
{
    if (strpbrk(s, ",\"\n")) {
        putchar('"');
        for (; *s; s++) {
            if (*s == '"')
                putchar('"');
            putchar(*s);
        }
        putchar('"');
    } else {
        fputs(s, stdout);
    }
}

static void csv_num(double v, int decimals)
{
    putchar(',');
    if (!isnan(v))
        printf("%.*f", decimals, v);
}

static void print_csv(const struct bench_result *r)
{
    printf("section,source,group,threads,median_ns,min_ns,max_ns,x_rdtsc,x_clock_gettime_monotonic,"
           "calls_per_s,step_ns,x_ordered_floor\n");
    for (int i = 0; i < r->nsrc; i++) {
        const struct source *s = &r->src[i];
        if (!s->usable)
            continue;
        printf("cost,");
        csv_field(s->key);
        printf(",%s,1", src_group_name(s->group));
        csv_num(s->median, 3);
        csv_num(s->min, 3);
        csv_num(s->max, 3);
        csv_num(bench_ratio(r, i, r->rdtsc), 3);
        csv_num(bench_ratio(r, i, r->cg_mono), 3);
        csv_num(NAN, 0);
        csv_num(s->step_ns, 1);
        csv_num(bench_ratio(r, i, r->ordered_floor), 3);
        putchar('\n');
    }
    for (int k = 0; k < r->nscale; k++) {
        const struct source *s = &r->src[r->scale_src[k]];
        for (int t = 0; t < r->nthreads; t++) {
            const struct bench_point *p = &r->point[k][t];
            if (!p->ok)
                continue;
            printf("scaling,");
            csv_field(s->key);
            printf(",%s,%d", src_group_name(s->group), r->threads[t]);
            csv_num(p->ns_per_call, 3);
            printf(",,,,");
            csv_num(p->calls_per_s, 0);
            printf(",,\n");
        }
    }
}

/* ---- command ------------------------------------------------------------- */

int cmd_bench(int argc, char **argv)
{
    int json = 0, csv = 0;
    const char *svg_path = NULL;
    struct bench_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.seconds = 3;
    default_threads(&cfg);

    enum { OPT_JSON = 256, OPT_CSV, OPT_THREADS, OPT_SECONDS, OPT_SVG };
    static const struct option opts[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"csv", no_argument, NULL, OPT_CSV},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"seconds", required_argument, NULL, OPT_SECONDS},
        {"svg", required_argument, NULL, OPT_SVG},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    struct opt_parser p = {.opts = opts, .shorts = "h"};
    const char *val;
    for (int c; (c = opt_next(&p, argc, argv, &val)) != -1;) {
        switch (c) {
        case OPT_JSON:
            json = 1;
            break;
        case OPT_CSV:
            csv = 1;
            break;
        case 'h':
            usage(stdout);
            return stdout_done("fastclock bench", 0, 2);
        case OPT_THREADS: {
            char err[160];
            int n = bench_parse_threads(val, cfg.threads, BENCH_MAX_THREADS, err, sizeof err);
            if (n < 0)
                return fail("%s", err);
            cfg.nthreads = n;
            break;
        }
        case OPT_SECONDS:
            if (parse_double(val, &cfg.seconds) != 0 || !(cfg.seconds >= 0.1 && cfg.seconds <= 3600))
                return fail("--seconds needs a number of seconds from 0.1 to 3600 (got '%s')", val);
            break;
        case OPT_SVG:
            if (!*val)
                return fail("%s", "--svg needs a file name");
            svg_path = val;
            break;
        default:
            return fail("%s", p.err);
        }
    }
    if (optind < argc)
        return fail("unexpected argument '%s'", argv[optind]);
    if (json && csv)
        return fail("%s", "--json and --csv cannot be combined");

    /* Open the chart now: a bad path should fail before minutes of measuring. */
    FILE *svg = NULL;
    if (svg_path) {
        svg = fopen(svg_path, "w");
        if (!svg) {
            fprintf(stderr, "fastclock bench: cannot write --svg %s: %s\n", svg_path, strerror(errno));
            return 2;
        }
    }
    cfg.progress = isatty(2) && !getenv("FASTCLOCK_NO_PROGRESS");

    static struct bench_result r; /* large: keep it off the stack */
    bench_run(&cfg, &r);
    if (strcmp(r.clocksource, r.clocksource_end) != 0)
        fprintf(stderr, "fastclock bench: the clocksource changed during the run (%s, then %s)\n", r.clocksource,
                r.clocksource_end);
    if (r.fc_changed_cost[0])
        fprintf(stderr, "fastclock bench: WARNING: fastclock changed during the cost phase, so its figures mix "
                        "two read paths: %s\n", r.fc_changed_cost);
    if (r.fc_changed_later[0])
        fprintf(stderr, "fastclock bench: WARNING: fastclock changed during thread scaling or granularity: %s\n",
                r.fc_changed_later);
    if (json)
        print_json(&r, &cfg);
    else if (csv)
        print_csv(&r);
    else
        print_text(&r);
    int status = 0;
    if (svg) {
        errno = 0;
        int write_err = svg_write(svg, &r) != 0 ? (errno ? errno : EIO) : 0;
        int close_err = fclose(svg) != 0 ? errno : 0; /* always closed, whatever the write did */
        if (write_err || close_err) {
            fprintf(stderr, "fastclock bench: writing %s failed: %s\n", svg_path,
                    strerror(write_err ? write_err : close_err));
            status = 2;
        } else if (!json && !csv) {
            printf("chart written to %s\n", svg_path);
        }
    }
    bench_free(&r);
    return stdout_done("fastclock bench", status, 2);
}
