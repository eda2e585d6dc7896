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
 * difference from plain, and the first read's own cost inside the process.
 *
 * usage: fastclock-bench-startup [--runs N] PROBE_PLAIN PROBE_LINKED LIBRARY
 *                                PRELOAD_SO [EMPTY_SO [PROBE_STATIC]]
 */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Runs one variant; with first_read, reads the probe's report from a pipe. */
static double run(const char *prog, char **env, int first_read, double *first_ns)
{
    int fd[2] = {-1, -1};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    char *argv[3] = {(char *)prog, first_read ? (char *)"report" : NULL, NULL};
    if (first_read) {
        if (pipe(fd) != 0)
            return -1;
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
    waitpid(pid, &st, 0);
    double t1 = now_us();
    if (first_read) {
        close(fd[1]);
        char buf[64] = {0};
        ssize_t n = read(fd[0], buf, sizeof buf - 1);
        close(fd[0]);
        *first_ns = n > 0 ? atof(buf) : -1;
    }
    return t1 - t0;
}

int main(int argc, char **argv)
{
    int runs = 300, a = 1;
    if (argc > 2 && strcmp(argv[1], "--runs") == 0) {
        runs = atoi(argv[2]);
        a = 3;
    }
    if (argc - a < 4 || argc - a > 6 || runs < 10 || runs > 100000) {
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
    for (int v = 0; v < NVAR; v++) /* warm the page cache */
        if (prog[v])
            run(prog[v], envs[v], 0, NULL);
    for (int r = 0; r < runs; r++)
        for (int v = 0; v < NVAR; v++) {
            if (!prog[v])
                continue;
            wall[v * runs + r] = run(prog[v], envs[v], 0, NULL);
            run(prog[v], envs[v], 1, &first[v * runs + r]);
        }
    printf("one read per process, %d interleaved runs of each; median wall time from spawn to reap\n", runs);
    printf("%-18s %12s %12s %16s\n", "process", "median us", "vs plain", "first read ns");
    double med[NVAR];
    for (int v = 0; v < NVAR; v++) {
        qsort(wall + v * runs, (size_t)runs, sizeof *wall, cmp);
        qsort(first + v * runs, (size_t)runs, sizeof *first, cmp);
        med[v] = wall[v * runs + runs / 2];
    }
    for (int v = 0; v < NVAR; v++)
        if (prog[v])
            printf("%-18s %12.1f %+12.1f %16.0f\n", names[v], med[v], med[v] - med[PLAIN], first[v * runs + runs / 2]);
    if (prog[EMPTY])
        printf("empty library: a shared library with nothing in it, preloaded -- what loading any library costs here\n");
    printf("linked: the library handed to the loader by its path, as an installed one is found (no RUNPATH search)\n");
    return 0;
}
