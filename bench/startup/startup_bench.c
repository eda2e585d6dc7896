/*
 * fastclock-bench-startup: what a whole process that reads the time once
 * costs with fastclock, against the same process on libc alone.
 *
 * Spawns, round-robin so that the machine's drift hits every variant alike:
 *   plain      a program on libc's clock_gettime;
 *   empty      the plain program with an empty shared library preloaded:
 *              what the dynamic loader charges for any library here, the
 *              floor under the linked and shim variants (optional);
 *   linked     the same read through libfastclock (calibrator thread: the
 *              default), the library handed to the loader by its path
 *              (LD_PRELOAD=LIBRARY; the probe has no RUNPATH), as an installed
 *              library is found: one look-up, no search of a build tree's
 *              RUNPATH and its glibc-hwcaps subdirectories;
 *   lazy       linked, FASTCLOCK_CALIBRATOR=lazy (no thread);
 *   static     linked with libfastclock.a, lazy: no library to load (optional);
 *   shim       the plain program under LD_PRELOAD=libfastclock-preload.so;
 * and reports the median wall time from posix_spawn to waitpid, the
 * difference from plain, and the first read's own cost inside the process
 * (the median over the runs that reported one; the others are counted).
 * Every probe must exit 0: one that fails (127: the loader could not start
 * it) stops the run with exit 1 rather than being timed as a fast start.
 *
 * usage: fastclock-bench-startup [--runs N] PROBE_PLAIN PROBE_LINKED LIBRARY
 *                                PRELOAD_SO [EMPTY_SO [PROBE_STATIC]]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../bench_util.h"

extern char **environ;

enum { PLAIN, EMPTY, LINKED, LAZY, STATIC, SHIM, NVAR };
static const char *const names[NVAR] = {"plain (libc)", "empty library", "linked (thread)",
                                        "linked (lazy)", "static (lazy)", "shim (lazy)"};

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

/* A probe that did not run to its end (exit 127: the loader could not
 * start it) would be timed as a fast start: the run stops here instead. */
static void require_success(const char *variant, const char *prog, int st)
{
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return;
    if (WIFEXITED(st))
        fprintf(stderr, "fastclock-bench-startup: %s (%s) exited with status %d%s; its start-up cannot be timed\n",
                variant, prog, WEXITSTATUS(st),
                WEXITSTATUS(st) == 127 ? " (the loader could not start it: a library missing?)" : "");
    else if (WIFSIGNALED(st))
        fprintf(stderr, "fastclock-bench-startup: %s (%s) was killed by signal %d (%s); its start-up cannot be timed\n",
                variant, prog, WTERMSIG(st), strsignal(WTERMSIG(st)));
    else
        fprintf(stderr, "fastclock-bench-startup: %s (%s) ended with wait status 0x%x\n", variant, prog, st);
    exit(1);
}

/* The probe's report: its first read's ns, a whole line and nothing else;
 * -1 when it wrote none (counted, never sorted in with the others). */
static double parse_first(const char *buf)
{
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (end == buf || errno || !(v >= 0) || (*end && strcmp(end, "\n") != 0))
        return -1;
    return v;
}

/* Runs one variant; with first_read, reads the probe's report from a pipe. */
static double run(const char *variant, const char *prog, char **env, int first_read, double *first_ns)
{
    int fd[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    char *argv[3] = {(char *)prog, first_read ? (char *)"report" : NULL, NULL};
    if (first_read) {
        if (pipe(fd) != 0) {
            perror("fastclock-bench-startup: pipe");
            exit(2);
        }
        posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
        posix_spawn_file_actions_addclose(&fa, fd[0]);
    }
    pid_t pid;
    double t0 = now_us();
    int r = posix_spawn(&pid, prog, &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    if (r != 0) {
        fprintf(stderr, "fastclock-bench-startup: cannot run %s: %s\n", prog, strerror(r));
        exit(2);
    }
    int st;
    pid_t w;
    while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR)
        ;
    double t1 = now_us();
    if (w != pid) {
        fprintf(stderr, "fastclock-bench-startup: waiting for %s: %s\n", prog, strerror(errno));
        exit(2);
    }
    require_success(variant, prog, st);
    if (first_read) {
        close(fd[1]);
        char buf[64] = {0};
        ssize_t n = read(fd[0], buf, sizeof buf - 1);
        close(fd[0]);
        *first_ns = n > 0 ? parse_first(buf) : -1;
    }
    return t1 - t0;
}

int main(int argc, char **argv)
{
    int runs = 300, a = 1;
    if (argc > 1 && strcmp(argv[1], "--runs") == 0) {
        long v;
        if (argc < 3 || bench_parse_count(argv[2], 10, 100000, &v) != 0) {
            fprintf(stderr, "fastclock-bench-startup: --runs needs a whole number from 10 to 100000 (got '%s')\n",
                    argc < 3 ? "" : argv[2]);
            return 2;
        }
        runs = (int)v;
        a = 3;
    }
    if (argc - a < 4 || argc - a > 6) {
        fprintf(stderr, "usage: fastclock-bench-startup [--runs N (10..100000)] PROBE_PLAIN PROBE_LINKED LIBRARY "
                        "PRELOAD_SO [EMPTY_SO [PROBE_STATIC]]\n");
        return 2;
    }
    const char *plain = argv[a], *linked = argv[a + 1], *library = argv[a + 2], *preload = argv[a + 3];
    const char *empty = argc - a > 4 ? argv[a + 4] : NULL, *stat = argc - a > 5 ? argv[a + 5] : NULL;
    if (access(plain, X_OK) || access(linked, X_OK) || access(library, R_OK) || access(preload, R_OK) ||
        (empty && access(empty, R_OK)) || (stat && access(stat, X_OK))) {
        fprintf(stderr, "fastclock-bench-startup: one of %s, %s, %s, %s%s%s%s%s is missing\n", plain, linked,
                library, preload, empty ? ", " : "", empty ? empty : "", stat ? ", " : "", stat ? stat : "");
        return 2;
    }
    if (!strchr(library, '/')) {
        fprintf(stderr, "fastclock-bench-startup: LIBRARY must be a path (with a /), or the loader searches for it\n");
        return 2;
    }
    /* Environments: the caller's, minus FASTCLOCK_* and LD_PRELOAD, plus each variant's. */
    int n = 0;
    while (environ[n])
        n++;
    char **base = calloc((size_t)n + 2, sizeof *base);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (strncmp(environ[i], "FASTCLOCK_", 10) && strncmp(environ[i], "LD_PRELOAD=", 11))
            base[m++] = environ[i];
    char *envs[NVAR][256];
    static char lazy[] = "FASTCLOCK_CALIBRATOR=lazy", pre[4096], pre_empty[4096], pre_lib[4096];
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", preload);
    snprintf(pre_lib, sizeof pre_lib, "LD_PRELOAD=%s", library);
    snprintf(pre_empty, sizeof pre_empty, "LD_PRELOAD=%s", empty ? empty : "");
    for (int v = 0; v < NVAR; v++) {
        int k = 0;
        for (int i = 0; i < m && k < 250; i++)
            envs[v][k++] = base[i];
        if (v == LAZY || v == STATIC)
            envs[v][k++] = lazy;
        if (v == SHIM)
            envs[v][k++] = pre;
        if (v == LINKED || v == LAZY)
            envs[v][k++] = pre_lib;
        if (v == EMPTY)
            envs[v][k++] = pre_empty;
        envs[v][k] = NULL;
    }
    const char *prog[NVAR] = {plain, empty ? plain : NULL, linked, linked, stat, plain};
    double *wall = calloc((size_t)NVAR * (size_t)runs, sizeof *wall);
    double *first = calloc((size_t)NVAR * (size_t)runs, sizeof *first);
    int nfirst[NVAR] = {0}, missing[NVAR] = {0};
    if (!wall || !first) {
        fprintf(stderr, "fastclock-bench-startup: out of memory\n");
        return 2;
    }
    for (int v = 0; v < NVAR; v++) /* warm the page cache; a probe that cannot run stops here */
        if (prog[v])
            run(names[v], prog[v], envs[v], 0, NULL);
    for (int r = 0; r < runs; r++)
        for (int v = 0; v < NVAR; v++) {
            if (!prog[v])
                continue;
            wall[v * runs + r] = run(names[v], prog[v], envs[v], 0, NULL);
            double f;
            run(names[v], prog[v], envs[v], 1, &f);
            if (f >= 0)
                first[v * runs + nfirst[v]++] = f;
            else
                missing[v]++; /* no report: left out of the median, and counted */
        }
    bench_print_machine(stdout);
    printf("one read per process, %d interleaved runs of each; median wall time from spawn to reap\n", runs);
    printf("%-18s %12s %12s %16s\n", "process", "median us", "vs plain", "first read ns");
    double med[NVAR], first_med[NVAR];
    for (int v = 0; v < NVAR; v++) {
        med[v] = prog[v] ? bench_median(wall + v * runs, runs) : NAN;
        first_med[v] = bench_median(first + v * runs, nfirst[v]);
    }
    int any_missing = 0;
    for (int v = 0; v < NVAR; v++)
        if (prog[v]) {
            printf("%-18s %12.1f %+12.1f", names[v], med[v], med[v] - med[PLAIN]);
            if (isnan(first_med[v]))
                printf(" %16s", "-");
            else
                printf(" %16.0f", first_med[v]);
            if (missing[v]) {
                printf("  (%d of %d runs reported no first read)", missing[v], runs);
                any_missing = 1;
            }
            printf("\n");
        }
    if (any_missing)
        fprintf(stderr, "fastclock-bench-startup: some probes reported no first read: their medians leave them out\n");
    if (prog[EMPTY])
        printf("empty library: a shared library with nothing in it, preloaded -- what loading any library costs here\n");
    printf("linked: the library handed to the loader by its path, as an installed one is found (no RUNPATH search)\n");
    return 0;
}
