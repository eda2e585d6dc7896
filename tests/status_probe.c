/* Prints what fastclock decided, after exercising every public function.
 * Compiled as strict C11: it is also the check that the headers are clean C. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* syscall(), for seccomp() with TSYNC */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fastclock.h"
#include "fastclock_inline.h"
#include "seccomp_filter.h"

/* The first descriptor that is a timerfd, or -1. */
static int a_timerfd(void)
{
    for (int fd = 0; fd < 64; fd++) {
        char link[64], target[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n > 0) {
            target[n] = 0;
            if (strcmp(target, "anon_inode:[timerfd]") == 0)
                return fd;
        }
    }
    return -1;
}

/* A worker that installs, on itself alone (no TSYNC), a seccomp filter that
 * kills the process for adjtimex and clock_adjtime, then reads the clock
 * for 100 ms: its reads poll adjtimex as any reader's do.  "installed",
 * or "unavailable" where no filter can be installed here. */
/* The worker's reads, kept. */
static volatile long sink;

/* Set by the filtered reader when its reads are done. */
static atomic_int filtered_done;

/* What the worker's filter does for adjtimex (filter-later-errno: refuse). */
static unsigned filtered_action = SECCOMP_RET_KILL_PROCESS;

static void *filtered_reader(void *arg)
{
    struct sock_filter code[] = FC_TEST_FILTER_TWO_CALLS(__NR_adjtimex, __NR_clock_adjtime, filtered_action);
    struct sock_fprog prog = {(unsigned short)(sizeof code / sizeof code[0]), code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        *(const char **)arg = "unavailable";
        atomic_store(&filtered_done, 1);
        return NULL;
    }
    int64_t end = fastclock_mono_ns() + 100000000;
    long sum = 0;
    while (fastclock_mono_ns() < end)
        sum += (long)(fastclock_real_ns() & 1);
    sink = sum;
    *(const char **)arg = "installed";
    atomic_store(&filtered_done, 1);
    return NULL;
}

/* filter-main-later's second reader: waits for main's filter, then reads
 * until told to stop. */
static atomic_int unfiltered_go, unfiltered_stop;
static void *unfiltered_reader(void *arg)
{
    (void)arg;
    while (!atomic_load(&unfiltered_go)) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    long s = 0;
    while (!atomic_load(&unfiltered_stop))
        s += (long)(fastclock_mono_ns() & 1);
    sink = s;
    return NULL;
}

int main(int argc, char **argv)
{
    /* Before anything else runs in main: what the library's constructor left. */
    int timerfd_at_main = a_timerfd();
    if (argc > 1 && strcmp(argv[1], "no-reads") == 0)
        return 0; /* what the library's constructor alone does */
    /* The environment the library read when it loaded, changed before the
     * first read: the decision must go by what it read then. */
    if (argc > 1 && strcmp(argv[1], "setenv-tsc") == 0)
        setenv("FASTCLOCK_MODE", "tsc", 1);
    struct timespec ts;
    struct timeval tv;
    long sum = 0;
    for (int i = 0; i < 1000; i++) {
        sum += (long)(fastclock_mono_ns() & 1);
        sum += (long)(fastclock_real_ns() & 1);
        sum += (long)(fastclock_mono_ns_unordered() & 1);
        sum += (long)(fastclock_real_ns_unordered() & 1);
        sum += (long)(fastclock_mono_coarse_ns() & 1);
        sum += (long)(fastclock_real_coarse_ns() & 1);
        sum += (long)(fastclock_mono_ns_inline() & 1);
        sum += (long)(fastclock_mono_ns_unordered_inline() & 1);
        sum += (long)(fastclock_mono_coarse_ns_inline() & 1);
        sum += (long)(fastclock_ticks_to_ns(fastclock_ticks()) & 1);
        if (fastclock_gettime(CLOCK_MONOTONIC, &ts) || fastclock_gettimeofday(&tv, NULL))
            return 3;
    }
    struct fastclock_status st;
    if (fastclock_status(&st) != 0)
        return 4;
    if (fastclock_status(&st) != 0)
        return 4;
    int64_t earliest, latest;
    int bounded = fastclock_real_bounded(&earliest, &latest);
    printf("mode=%s\nforced=%d\ncalibrator=%s\ncounter=%s\nordered=%d\nreason=%s\nversion=%s\n"
           "kernel_synchronized=%d\nreal_bounded=%d\n",
           st.mode, st.forced, st.calibrator, st.counter, st.ordered, st.reason, fastclock_version(),
           st.kernel_synchronized, bounded);
    if (argc > 1 && strcmp(argv[1], "fds") == 0) {
        printf("timerfd_at_main=%d\n", timerfd_at_main);
        /* What descriptors 0-15 are, once the calibrator thread is up. */
        struct timespec nap = {0, 50000000};
        nanosleep(&nap, NULL);
        for (int fd = 0; fd < 16; fd++) {
            char link[64], target[256];
            snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
            ssize_t n = readlink(link, target, sizeof target - 1);
            target[n > 0 ? n : 0] = 0;
            printf("fd.%d=%s\n", fd, n > 0 ? target : "closed");
        }
    }
    if (argc > 1 && strcmp(argv[1], "fork-errno") == 0) {
        /* The program closes the calibrator's timerfd (a daemon closing
         * every descriptor), then forks: the child's fork() returns 0 with
         * errno as it was before the call. */
        fflush(stdout);
        int fd = a_timerfd();
        /* Close and fork at once: should the thread's next wait see the
         * closed number first, it forgets it, and the child would ask
         * nothing (the test could then pass without the fix, never fail
         * with it). */
        int closed = fd >= 0 && close(fd) == 0;
        errno = EDOM;
        pid_t pid = fork();
        if (pid == 0)
            _exit(errno == EDOM ? 0 : errno == 0 ? 255 : errno);
        int status = -1;
        waitpid(pid, &status, 0);
        printf("timerfd_closed=%d\nchild_errno=%s\n", closed,
               WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "unchanged" : "changed");
    }
    if (argc > 1 && strcmp(argv[1], "filter-later-errno") == 0)
        filtered_action = SECCOMP_RET_ERRNO | EPERM;
    if (argc > 1 && strncmp(argv[1], "filter-later", 12) == 0 && strcmp(argv[1], "filter-later-tsync") != 0) {
        /* The process has polled adjtimex by now (the calibrator thread
         * every 10 ms, this thread's reads every ms): asked and answered
         * without a filter.  A thread that installs one later asks again. */
        struct timespec nap = {0, 50000000};
        nanosleep(&nap, NULL);
        for (int i = 0; i < 1000; i++)
            sum += (long)(fastclock_mono_ns() & 1);
        const char *filter = "not run";
        pthread_t worker;
        if (pthread_create(&worker, NULL, filtered_reader, &filter) != 0)
            return 6;
        /* Meanwhile this thread reads and asks the status every ms: the
         * worker's refusals are its own, and the process's state stays the
         * answer this thread and the calibrator get. */
        int unknown_seen = 0, samples = 0;
        while (!atomic_load(&filtered_done)) {
            for (int i = 0; i < 100; i++)
                sum += (long)(fastclock_mono_ns() & 1);
            if (fastclock_status(&st) != 0)
                return 4;
            unknown_seen += st.kernel_synchronized == -1;
            samples++;
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
        if (pthread_join(worker, NULL) != 0)
            return 6;
        printf("filter=%s\nsynchronized_unknown_seen=%d\nstatus_samples=%d\n", filter, unknown_seen, samples);
    }
    if (argc > 1 && strcmp(argv[1], "filter-main-later") == 0) {
        /* main reads (its polls answered, last), then installs a filter
         * that kills for adjtimex on itself alone (no TSYNC) and reads on
         * for 300 ms, asking the status every ms; meanwhile a thread made
         * before the filter (so without it) starts reading.  main's
         * refusals must not hold back that thread's polls (nor the
         * calibrator thread's), which are answered. */
        pthread_t other;
        if (pthread_create(&other, NULL, unfiltered_reader, NULL) != 0)
            return 6;
        struct timespec nap = {0, 50000000};
        nanosleep(&nap, NULL);
        for (int i = 0; i < 1000; i++)
            sum += (long)(fastclock_real_ns() & 1);
        int64_t lo, hi;
        fastclock_real_bounded(&lo, &hi);
        struct sock_filter code[] =
            FC_TEST_FILTER_TWO_CALLS(__NR_adjtimex, __NR_clock_adjtime, SECCOMP_RET_KILL_PROCESS);
        struct sock_fprog prog = {(unsigned short)(sizeof code / sizeof code[0]), code};
        const char *filter = "installed";
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
            filter = "unavailable";
        atomic_store(&unfiltered_go, 1);
        int unknown_late = 0, samples = 0;
        for (int i = 0; i < 300 && filter[0] == 'i'; i++) {
            for (int j = 0; j < 100; j++)
                sum += (long)(fastclock_mono_ns() & 1);
            if (fastclock_status(&st) != 0)
                return 4;
            samples++;
            unknown_late += i >= 200 && st.kernel_synchronized == -1; /* the last 100 ms */
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
        }
        atomic_store(&unfiltered_stop, 1);
        if (pthread_join(other, NULL) != 0)
            return 6;
        printf("filter=%s\nsynchronized_unknown_late=%d\nstatus_samples=%d\n", filter, unknown_late, samples);
    }
    if (argc > 1 && strcmp(argv[1], "filter-later-tsync") == 0) {
        /* As filter-later, but main installs the filter on every thread of
         * the process (TSYNC, as libseccomp does for a threaded program):
         * the calibrator thread too, which asked and was answered before. */
        struct timespec nap = {0, 50000000};
        nanosleep(&nap, NULL);
        struct sock_filter code[] =
            FC_TEST_FILTER_TWO_CALLS(__NR_adjtimex, __NR_clock_adjtime, SECCOMP_RET_KILL_PROCESS);
        struct sock_fprog prog = {(unsigned short)(sizeof code / sizeof code[0]), code};
        const char *filter = "installed";
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
            syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
            filter = "unavailable";
        /* Read for 100 ms, sleeping between bursts: the calibrator thread
         * polls every 10 ms meanwhile, this thread every ms of reading. */
        for (int i = 0; i < 20 && filter[0] == 'i'; i++) {
            for (int j = 0; j < 1000; j++)
                sum += (long)(fastclock_real_ns() & 1);
            struct timespec ms5 = {0, 5000000};
            nanosleep(&ms5, NULL);
        }
        /* Refused since, by every thread: unknown, once a poll runs a
         * second after the last answer (a refusal sooner is taken for the
         * thread's own, sync.c); up to 3 s on a starved machine. */
        for (int i = 0; i < 300; i++) {
            if (fastclock_status(&st) != 0)
                return 4;
            if (st.kernel_synchronized == -1 || filter[0] != 'i')
                break;
            sum += (long)(fastclock_real_ns() & 1);
            struct timespec ms10 = {0, 10000000};
            nanosleep(&ms10, NULL);
        }
        printf("filter=%s\nkernel_synchronized_after=%d\n", filter, st.kernel_synchronized);
    }
    (void)timerfd_at_main;
    return sum < 0 ? 5 : 0;
}
