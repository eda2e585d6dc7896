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
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

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

/* The first line of path, without its newline ("unknown" where unreadable). */
static inline void bench_first_line(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    if (!f || !fgets(buf, (int)size, f))
        snprintf(buf, size, "unknown");
    if (f)
        fclose(f);
    size_t n = strcspn(buf, "\n");
    while (n > 0 && buf[n - 1] == ' ') /* available_clocksource ends with one */
        n--;
    buf[n] = 0;
}

/* "machine: CPU model, VM or bare metal, N CPUs, clocksource (available),
 * Linux release": the line every benchmark prints beside its numbers. */
static inline void bench_print_machine(FILE *out)
{
    char cpu[256] = "unknown CPU", line[4096], cs[64], avail[256];
    int vm = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        const char *p = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && p && strcmp(cpu, "unknown CPU") == 0) {
            for (p++; *p == ' '; p++) {
            }
            snprintf(cpu, sizeof cpu, "%s", p);
            cpu[strcspn(cpu, "\n")] = 0;
        }
        if ((strncmp(line, "flags", 5) == 0 && strstr(line, " hypervisor")) || strncmp(line, "Hypervisor", 10) == 0)
            vm = 1;
    }
    if (f)
        fclose(f);
    struct utsname u;
    if (uname(&u) != 0)
        snprintf(u.release, sizeof u.release, "unknown");
    bench_first_line("/sys/devices/system/clocksource/clocksource0/current_clocksource", cs, sizeof cs);
    bench_first_line("/sys/devices/system/clocksource/clocksource0/available_clocksource", avail, sizeof avail);
    fprintf(out, "machine: %s, %s, %ld CPUs, clocksource %s (available: %s), Linux %s\n", cpu,
            vm ? "virtual machine" : "no hypervisor seen", sysconf(_SC_NPROCESSORS_ONLN), cs, avail, u.release);
}

#endif
