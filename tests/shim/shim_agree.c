/*
 * Runs a program (normally through `fastclock run`) and checks the times it
 * reports against this process's own clocks, which nothing interposes (raw
 * system calls).
 *
 *   shim_agree once [TOL_NS] -- CMD...
 *       CMD prints tokens such as real=NS, mono=NS, real_ms=MS; each must lie
 *       within TOL (default 1 ms) of [clock before starting CMD, clock after
 *       it exited].
 *   shim_agree serve ROUNDS [TOL_NS] -- CMD...
 *       Ping-pong: for each round, write a line to CMD's stdin and read one
 *       line of tokens back; each value must lie within TOL of [clock before
 *       the request, clock after the reply].  A tight bracket, so a real
 *       1 ms check.
 *   shim_agree status -- CMD...
 *       Prints "exited N" or "signal N" for CMD: what a caller of CMD sees.
 *
 * Tokens: mono (CLOCK_MONOTONIC ns), real (CLOCK_REALTIME ns), real_us,
 * real_ms (truncated: allowed one unit below).  Exit 0 when all agree and CMD
 * exited 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NS 1000000000LL

static int64_t sys_ns(clockid_t id)
{
    struct timespec ts;
    syscall(SYS_clock_gettime, id, &ts);
    return (int64_t)ts.tv_sec * NS + ts.tv_nsec;
}

struct bracket {
    int64_t mono0, real0, mono1, real1;
};

struct stats {
    const char *name;
    long n, bad;
    int64_t worst_before, worst_after; /* how far outside [t0, t1], ns */
};
static struct stats stats[] = {{"mono", 0, 0, 0, 0}, {"real", 0, 0, 0, 0}, {"real_us", 0, 0, 0, 0},
                               {"real_ms", 0, 0, 0, 0}};
#define N_KINDS 4

static void take(struct bracket *b, int after)
{
    if (after) {
        b->real1 = sys_ns(CLOCK_REALTIME);
        b->mono1 = sys_ns(CLOCK_MONOTONIC);
    } else {
        b->mono0 = sys_ns(CLOCK_MONOTONIC);
        b->real0 = sys_ns(CLOCK_REALTIME);
    }
}

/* Check every token of `line`; returns how many were recognised. */
static int check_line(char *line, const struct bracket *b, int64_t tol)
{
    int seen = 0;
    for (char *tok = strtok(line, " \t\r\n"); tok; tok = strtok(NULL, " \t\r\n")) {
        char *eq = strchr(tok, '=');
        if (!eq)
            continue;
        *eq = 0;
        int64_t v = strtoll(eq + 1, NULL, 10), unit = 1, t0, t1;
        int k;
        if (strcmp(tok, "mono") == 0) k = 0;
        else if (strcmp(tok, "real") == 0) k = 1;
        else if (strcmp(tok, "real_us") == 0) k = 2, unit = 1000;
        else if (strcmp(tok, "real_ms") == 0) k = 3, unit = 1000000;
        else continue;
        t0 = k == 0 ? b->mono0 : b->real0;
        t1 = k == 0 ? b->mono1 : b->real1;
        v *= unit;
        struct stats *s = &stats[k];
        s->n++;
        if (t0 - v > s->worst_before) s->worst_before = t0 - v;
        if (v - t1 > s->worst_after) s->worst_after = v - t1;
        /* A truncated value may be one unit below the true time. */
        if (v < t0 - tol - (unit - 1) || v > t1 + tol) {
            if (s->bad++ < 5)
                fprintf(stderr, "FAIL: %s=%" PRId64 " is outside [%" PRId64 ", %" PRId64 "] +- %" PRId64 " ns\n",
                        tok, v, t0, t1, tol);
        }
        seen++;
    }
    return seen;
}

static int summary(int64_t tol, long rounds, int64_t widest)
{
    int bad = 0, seen = 0;
    for (int k = 0; k < N_KINDS; k++) {
        if (!stats[k].n)
            continue;
        seen++;
        printf("  %-8s %5ld values: worst %" PRId64 " ns before / %" PRId64 " ns after the bracket (tolerance %" PRId64
               " ns)%s\n", stats[k].name, stats[k].n, stats[k].worst_before, stats[k].worst_after, tol,
               stats[k].bad ? "  <-- FAILED" : "");
        bad += stats[k].bad != 0;
    }
    printf("  %ld rounds, widest bracket %" PRId64 " us\n", rounds, widest / 1000);
    if (!seen) {
        fprintf(stderr, "FAIL: the program reported no time\n");
        return 1;
    }
    return bad != 0;
}

static int wait_status(pid_t pid, const char *what)
{
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    if (WIFEXITED(st))
        fprintf(stderr, "FAIL: %s exited %d\n", what, WEXITSTATUS(st));
    else
        fprintf(stderr, "FAIL: %s was killed by signal %d\n", what, WTERMSIG(st));
    return 1;
}

static pid_t spawn(char **cmd, int *to_child, int *from_child)
{
    int in[2], out[2];
    if (pipe(in) || pipe(out)) {
        perror("pipe");
        exit(2);
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]); close(in[1]); close(out[0]); close(out[1]);
        execvp(cmd[0], cmd);
        fprintf(stderr, "shim_agree: %s: %s\n", cmd[0], strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    if (to_child)
        *to_child = in[1];
    else
        close(in[1]);
    *from_child = out[0];
    return pid;
}

static int cmd_once(int64_t tol, char **cmd)
{
    struct bracket b;
    int from;
    take(&b, 0);
    pid_t pid = spawn(cmd, NULL, &from);
    char buf[4096];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(from, buf + n, sizeof buf - 1 - n)) != 0) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        n += (size_t)r;
    }
    int rc = wait_status(pid, cmd[0]);
    take(&b, 1);
    buf[n] = 0;
    printf("  %s printed: %s", cmd[0], buf);
    if (n && buf[n - 1] != '\n')
        putchar('\n');
    check_line(buf, &b, tol);
    return summary(tol, 1, b.mono1 - b.mono0) | rc;
}

static int cmd_serve(long rounds, int64_t tol, char **cmd)
{
    int to, from;
    signal(SIGPIPE, SIG_IGN);
    pid_t pid = spawn(cmd, &to, &from);
    FILE *in = fdopen(from, "r");
    char line[4096];
    int64_t widest = 0;
    long done = 0;
    int rc = 0;
    /* One unchecked round first: the program's start-up is not its clock. */
    if (write(to, "\n", 1) != 1 || !fgets(line, sizeof line, in)) {
        fprintf(stderr, "FAIL: the program did not answer\n");
        rounds = 0;
        rc = 1;
    }
    for (long i = 0; i < rounds; i++) {
        struct bracket b;
        take(&b, 0);
        if (write(to, "\n", 1) != 1 || !fgets(line, sizeof line, in)) {
            fprintf(stderr, "FAIL: the program stopped answering after %ld rounds\n", i);
            rc = 1;
            break;
        }
        take(&b, 1);
        if (b.mono1 - b.mono0 > widest)
            widest = b.mono1 - b.mono0;
        if (!check_line(line, &b, tol)) {
            fprintf(stderr, "FAIL: no time in the reply '%s'\n", line);
            rc = 1;
            break;
        }
        done++;
    }
    close(to);
    rc |= wait_status(pid, cmd[0]);
    fclose(in);
    return summary(tol, done, widest) | rc;
}

static int cmd_status(char **cmd)
{
    pid_t pid = fork();
    if (pid == 0) {
        execvp(cmd[0], cmd);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(st))
        printf("exited %d\n", WEXITSTATUS(st));
    else
        printf("signal %d\n", WTERMSIG(st));
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    int dd = 1;
    while (dd < argc && strcmp(argv[dd], "--") != 0)
        dd++;
    if (argc < 3 || dd >= argc - 1) {
        fprintf(stderr, "usage: shim_agree once [TOL_NS] -- CMD... | serve ROUNDS [TOL_NS] -- CMD... | status -- CMD...\n");
        return 2;
    }
    char **cmd = argv + dd + 1;
    if (strcmp(argv[1], "once") == 0)
        return cmd_once(dd > 2 ? strtoll(argv[2], NULL, 10) : 1000000, cmd);
    if (strcmp(argv[1], "serve") == 0 && dd > 2)
        return cmd_serve(atol(argv[2]), dd > 3 ? strtoll(argv[3], NULL, 10) : 1000000, cmd);
    if (strcmp(argv[1], "status") == 0)
        return cmd_status(cmd);
    fprintf(stderr, "shim_agree: unknown command %s\n", argv[1]);
    return 2;
}
