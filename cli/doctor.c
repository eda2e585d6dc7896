/* fastclock doctor: detect, measure and recommend.
 *
 *   fastclock doctor [--json] [--quick]
 *
 * Hidden options for tests and for making test fixtures:
 *   --root DIR     describe the machine captured in DIR instead of this one
 *                  (nothing is measured live; see fixture.c)
 *   --capture DIR  also write a capture of this machine into DIR */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "findings.h"
#include "probe.h"
#include "report.h"
#include "util.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: fastclock doctor [--json] [--quick]\n"
               "\n"
               "Explains how this machine keeps time, measures every clock, and says what to change.\n"
               "\n"
               "  --json    machine-readable report (schema: docs/doctor.schema.json)\n"
               "  --quick   shorter measurements (under 2 s instead of 5-7 s)\n"
               "\n"
               "exit status: 0 no problem found, 1 a problem was found, 2 usage or internal error\n");
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "fastclock doctor: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    usage(stderr);
    return 2;
}

struct progress {
    int on;
    int64_t start;
};

static void show_progress(const char *what, void *ctx)
{
    struct progress *p = ctx;
    if (!p->on)
        return;
    fprintf(stderr, "\r\033[Kdoctor: %s... (%.1f s)", what, (double)(mono_raw_ns() - p->start) / 1e9);
    fflush(stderr);
}

int cmd_doctor(int argc, char **argv)
{
    int json = 0, quick = 0;
    const char *root = NULL, *capture = NULL;
    enum { OPT_JSON = 256, OPT_QUICK, OPT_ROOT, OPT_CAPTURE };
    static const struct option opts[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"quick", no_argument, NULL, OPT_QUICK},
        {"root", required_argument, NULL, OPT_ROOT},
        {"capture", required_argument, NULL, OPT_CAPTURE},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    static const char *const needs[] = {NULL, NULL, "a directory", "a directory", NULL};
    struct opt_parser p = {.opts = opts, .shorts = "h", .needs = needs};
    const char *val;
    for (int c; (c = opt_next(&p, argc, argv, &val)) != -1;) {
        switch (c) {
        case OPT_JSON:
            json = 1;
            break;
        case OPT_QUICK:
            quick = 1;
            break;
        case 'h':
            usage(stdout);
            return stdout_done("fastclock doctor", 0, 2);
        case OPT_ROOT:
        case OPT_CAPTURE:
            if (!*val)
                return usage_error("%s needs a directory", c == OPT_ROOT ? "--root" : "--capture");
            *(c == OPT_ROOT ? &root : &capture) = val;
            break;
        default:
            return usage_error("%s", p.err);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if (root && capture)
        return usage_error("%s", "--root and --capture cannot be combined");

    static struct doctor_facts f; /* large: keep it off the stack */
    facts_init(&f);
    f.quick = quick;
    struct progress prog = {isatty(2) && !getenv("FASTCLOCK_NO_PROGRESS"), mono_raw_ns()};

    if (root) {
        char err[512];
        probe_files(&f, root);
        if (fixture_load(&f, root, err, sizeof err) != 0) {
            fprintf(stderr, "fastclock doctor: %s\n", err);
            return 2;
        }
    } else {
        show_progress("reading the system", &prog);
        probe_files(&f, "");
        probe_live(&f);
        measure_live(&f, quick, show_progress, &prog);
    }
    facts_choose_frequency(&f);

    static struct findings fs;
    findings_compute(&f, &fs);
    f.elapsed_s = (double)(mono_raw_ns() - prog.start) / 1e9;
    if (prog.on)
        fprintf(stderr, "\r\033[K");

    if (capture) {
        char err[512];
        if (capture_write(&f, capture, err, sizeof err) != 0) {
            fprintf(stderr, "fastclock doctor: %s\n", err);
            return 2;
        }
        fprintf(stderr, "fastclock doctor: wrote a capture of this machine to %s\n", capture);
    }

    if (json)
        report_json(stdout, &f, &fs);
    else
        report_text(stdout, &f, &fs, want_colour(stdout));
    return stdout_done("fastclock doctor", findings_worst(&fs) == SEV_PROBLEM ? 1 : 0, 2);
}
