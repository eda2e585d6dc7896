/* Helpers the benchmarks in bench/ share, and their tests check
 * (tests/cli/bench_test.cc): a median, a comparison that says "slower" when
 * it is, and a strict whole-number argument.  Header-only: each benchmark
 * is one source file. */
#ifndef FASTCLOCK_BENCH_UTIL_H
#define FASTCLOCK_BENCH_UTIL_H

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Sorts v[0..n) and returns its median: the middle value, or the mean of
 * the two middle values for an even count; NaN for none. */
static inline double bench_median(double *v, int n)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Cost `x` against cost `ref` (ns per call: lower is faster), in words
 * that end before "than"/"as" + the reference: "1.20x faster than",
 * "1.05x slower than", or "as fast as" within half a percent either way. */
static inline const char *bench_compare(char *buf, size_t size, double x, double ref)
{
    if (!(x > 0) || !(ref > 0))
        snprintf(buf, size, "not comparable with");
    else if (ref / x >= 1.005)
        snprintf(buf, size, "%.2fx faster than", ref / x);
    else if (x / ref >= 1.005)
        snprintf(buf, size, "%.2fx slower than", x / ref);
    else
        snprintf(buf, size, "as fast as");
    return buf;
}

/* A whole decimal number in [min, max], nothing before or after it
 * ("50x", "", " 5", "1e3" are refused).  0, or -1 with *out untouched. */
static inline int bench_parse_count(const char *s, long min, long max, long *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

#endif
