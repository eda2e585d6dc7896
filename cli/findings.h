/* The doctor's conclusions: from facts to findings, ranked by impact.
 * A pure function of struct doctor_facts, so every path is tested on
 * captures of machines we do not have. */
#ifndef FASTCLOCK_CLI_FINDINGS_H
#define FASTCLOCK_CLI_FINDINGS_H

#include "facts.h"

enum severity { SEV_OK, SEV_INFO, SEV_WARNING, SEV_PROBLEM };

struct finding {
    enum severity severity;
    double impact;          /* for ranking within a severity: ns per call at stake, or a weight */
    char id[48];            /* stable identifier, e.g. "clocksource-syscall" */
    char message[1024];     /* what is wrong (or right) and what it means for a program */
    char fix[1024];         /* what to do; "" when nothing */
};

#define MAX_FINDINGS 32

/* One run's ratio of libc's cost to fastclock's: a gain only from here on
 * (nearer 1 is noise on a shared machine); as far below 1, a loss. */
#define FINDINGS_GAIN_RATIO 1.05

/* libc's clock_gettime(CLOCK_MONOTONIC) over fastclock's in this run (NAN
 * where either was not measured): linking and calling fastclock_mono_ns,
 * and `fastclock run`, under which clock_gettime costs what
 * fastclock_gettime does.  The finding and the verdict both ask these. */
double findings_link_gain(const struct doctor_facts *f);
double findings_run_gain(const struct doctor_facts *f);

struct findings {
    int n;
    struct finding f[MAX_FINDINGS];
};

/* Computes the findings, most severe and most costly first. */
void findings_compute(const struct doctor_facts *facts, struct findings *out);

const char *severity_name(enum severity s);
/* The worst severity, SEV_OK when there are no findings. */
enum severity findings_worst(const struct findings *fs);
/* The finding with this id, or NULL. */
const struct finding *findings_get(const struct findings *fs, const char *id);

#endif
