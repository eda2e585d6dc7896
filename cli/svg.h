/* `fastclock bench --svg FILE`: one self-contained SVG with two charts,
 * cost per call (log scale, one bar per source, min-max whiskers) and
 * thread scaling (total calls per second against threads). */
#ifndef FASTCLOCK_CLI_SVG_H
#define FASTCLOCK_CLI_SVG_H

#include <stdio.h>

#include "benchrun.h"

/* Returns 0, or -1 if writing failed (errno set). */
int svg_write(FILE *out, const struct bench_result *r);

#endif
