/* Measurement on the running machine: what each clock costs, whether libc's
 * call enters the kernel, clock resolution, cross-CPU warp, the counter's
 * real frequency, and fastclock's own mode and speed. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "counter.h"
#include "fastclock.h"
#include "kernel.h"
#include "probe.h"
#include "sources.h"
#include "warp.h"

/* ---- does libc's call enter the kernel? --------------------------------- *
 * A forked child installs a seccomp filter that fails clock_gettime,
 * gettimeofday and time system calls with a marker errno no kernel returns
 * on its own, then calls libc.  Only a real system call can come back with
 * the marker; a vDSO read never meets the filter. */

#define MARKER_ERRNO 3917

#if defined(__x86_64__)
#define SECCOMP_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SECCOMP_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

enum { VERDICT_VDSO = 0, VERDICT_KERNEL = 1, VERDICT_ERROR = 2 };

struct seccomp_report {
    int stage;      /* 0 ok, 1 no_new_privs, 2 filter, 3 the filter did not catch a direct syscall */
    int err;
    int verdict[FACT_NCALLS];
    int errs[FACT_NCALLS];
};

#ifdef SECCOMP_AUDIT_ARCH
static void seccomp_child(int fd)
{
    struct seccomp_report rep;
    memset(&rep, 0, sizeof rep);
#define TRAP(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), \
                 BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | MARKER_ERRNO)
    struct sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_AUDIT_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        TRAP(__NR_clock_gettime),
        TRAP(__NR_gettimeofday),
#ifdef __NR_time
        TRAP(__NR_time),
#endif
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
#undef TRAP
    struct sock_fprog fp = {.len = (unsigned short)(sizeof prog / sizeof prog[0]), .filter = prog};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        rep.stage = 1;
        rep.err = errno;
    } else if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fp) != 0) {
        rep.stage = 2;
        rep.err = errno;
    } else {
        struct timespec ts;
        errno = 0;
        long r = syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
        if (!(r == -1 && errno == MARKER_ERRNO)) {
            rep.stage = 3;
            rep.err = errno;
        }
    }
    if (rep.stage == 0) {
        for (int i = 0; i < FACT_NCLOCKS; i++) {
            struct timespec ts;
            errno = 0;
            int r = clock_gettime(fact_clock_ids[i], &ts);
            rep.verdict[i] = r == 0 ? VERDICT_VDSO : errno == MARKER_ERRNO ? VERDICT_KERNEL : VERDICT_ERROR;
            rep.errs[i] = r == 0 ? 0 : errno;
        }
        /* The vDSO's gettimeofday and time, reached through IFUNCs, return
         * -errno themselves instead of setting errno. */
        struct timeval tv;
        errno = 0;
        int r = gettimeofday(&tv, NULL);
        rep.verdict[CALL_GETTIMEOFDAY] = r == 0                                          ? VERDICT_VDSO
                                         : (r == -MARKER_ERRNO || errno == MARKER_ERRNO) ? VERDICT_KERNEL
                                                                                         : VERDICT_ERROR;
        rep.errs[CALL_GETTIMEOFDAY] = errno;
        errno = 0;
        time_t t = time(NULL);
        rep.verdict[CALL_TIME] = (t == (time_t)-MARKER_ERRNO || (t == (time_t)-1 && errno == MARKER_ERRNO))
                                     ? VERDICT_KERNEL
                                     : VERDICT_VDSO;
    }
    ssize_t w = write(fd, &rep, sizeof rep);
    (void)w;
    _exit(0);
}
#endif

void measure_seccomp(struct doctor_facts *f)
{
#ifndef SECCOMP_AUDIT_ARCH
    f->seccomp_ok = TRI_NO;
    copy_str(f->seccomp_err, sizeof f->seccomp_err, "no seccomp verdict on this architecture");
    return;
#else
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        f->seccomp_ok = TRI_NO;
        snprintf(f->seccomp_err, sizeof f->seccomp_err, "pipe: %s", strerror(errno));
        return;
    }
    pid_t pid = fork();
    if (pid < 0) {
        f->seccomp_ok = TRI_NO;
        snprintf(f->seccomp_err, sizeof f->seccomp_err, "fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        return;
    }
    if (pid == 0) {
        close(p[0]);
        seccomp_child(p[1]);
    }
    close(p[1]);
    struct seccomp_report rep;
    size_t got = 0;
    struct pollfd pfd = {.fd = p[0], .events = POLLIN};
    while (got < sizeof rep && poll(&pfd, 1, 3000) > 0) {
        ssize_t n = read(p[0], (char *)&rep + got, sizeof rep - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(p[0]);
    if (got < sizeof rep)
        kill(pid, SIGKILL);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (got < sizeof rep) {
        f->seccomp_ok = TRI_NO;
        copy_str(f->seccomp_err, sizeof f->seccomp_err, "the probe process died or hung");
        return;
    }
    if (rep.stage) {
        static const char *const stage[] = {"", "prctl(PR_SET_NO_NEW_PRIVS)", "prctl(PR_SET_SECCOMP)",
                                            "the filter did not catch a direct system call"};
        f->seccomp_ok = TRI_NO;
        snprintf(f->seccomp_err, sizeof f->seccomp_err, "%s failed%s%s", stage[rep.stage],
                 rep.stage < 3 ? ": " : "", rep.stage < 3 ? strerror(rep.err) : "");
        return;
    }
    f->seccomp_ok = TRI_YES;
    f->seccomp_err[0] = 0;
    for (int i = 0; i < FACT_NCALLS; i++) {
        struct clock_fact *c = &f->call[i];
        switch (rep.verdict[i]) {
        case VERDICT_VDSO:
            c->enters_kernel = TRI_NO;
            copy_str(c->verdict, sizeof c->verdict, "seccomp: answered without a system call");
            break;
        case VERDICT_KERNEL:
            c->enters_kernel = TRI_YES;
            copy_str(c->verdict, sizeof c->verdict, "seccomp: made the clock system call");
            break;
        default:
            c->enters_kernel = TRI_UNKNOWN;
            snprintf(c->verdict, sizeof c->verdict, "the call failed (%s)", strerror(rep.errs[i]));
        }
    }
#endif
}

/* ---- cost of every clock ------------------------------------------------- */

static void measure_costs(struct doctor_facts *f, int quick)
{
    /* libc and raw syscall for each call, plus fastclock's three flavours. */
    struct source s[2 * FACT_NCALLS + 4];
    int n = 0;
    for (int i = 0; i < FACT_NCLOCKS; i++) {
        src_clock_gettime(&s[n++], i);
        src_syscall_clock_gettime(&s[n++], i);
    }
    src_gettimeofday(&s[n++], 0);
    src_gettimeofday(&s[n++], 1);
    src_time(&s[n++], 0);
    src_time(&s[n++], 1);
    int fc0 = n;
    src_fastclock(&s[n++], FC_SRC_MONO);
    src_fastclock(&s[n++], FC_SRC_MONO_UNORDERED);
    src_fastclock(&s[n++], FC_SRC_MONO_COARSE);
    src_fastclock(&s[n++], FC_SRC_GETTIME); /* what a program under `fastclock run` pays for clock_gettime */

    if (quick)
        src_measure(s, n, 0.35, 200e3, 5, NULL, NULL);
    else
        src_measure(s, n, 3.0, 1e6, 15, NULL, NULL);

    for (int i = 0; i < FACT_NCALLS; i++) {
        struct clock_fact *c = &f->call[i];
        struct source *libc = &s[2 * i], *sys = &s[2 * i + 1];
        c->supported = libc->usable ? TRI_YES : TRI_NO;
        c->err = libc->err;
        if (c->supported == TRI_NO) {
            /* The sandbox saw its call reach the kernel only to fail there
             * (CLOCK_*_ALARM without the hardware, say): no verdict on a call
             * that does not work. */
            c->enters_kernel = TRI_UNKNOWN;
            snprintf(c->verdict, sizeof c->verdict, "unsupported here (%s)",
                     c->err ? strerror(c->err) : "no error code");
        }
        c->libc_ns = libc->median;
        c->syscall_ns = sys->median;
    }
    f->fc_ns = s[fc0].median;
    f->fc_unordered_ns = s[fc0 + 1].median;
    f->fc_coarse_ns = s[fc0 + 2].median;
    f->fc_gettime_ns = s[fc0 + 3].median;
    src_free(s, n);
}

/* ---- resolution and observed step --------------------------------------- */

static void measure_steps(struct doctor_facts *f, int quick)
{
    for (int i = 0; i < FACT_NCALLS; i++) {
        struct clock_fact *c = &f->call[i];
        struct source s;
        double window = 20e6;
        if (i < FACT_NCLOCKS) {
            struct timespec res;
            if (clock_getres(c->id, &res) == 0)
                c->res_ns = (double)res.tv_sec * 1e9 + (double)res.tv_nsec;
            src_clock_gettime(&s, i);
            /* Coarse clocks move once per tick: watch five, as a tick the
             * timekeeping CPU skips shows up as a double step. */
            if (c->res_ns > 1e5)
                window = fmin(fmax(5 * c->res_ns, 10e6), 60e6);
        } else if (i == CALL_GETTIMEOFDAY) {
            c->res_ns = 1e3;
            src_gettimeofday(&s, 0);
        } else {
            c->res_ns = 1e9;
            if (quick) /* a step of time() takes up to a second to see */
                continue;
            src_time(&s, 0);
            window = 1.1e9;
        }
        if (quick && window > 20e6)
            window = 20e6 + (window - 20e6) / 2;
        src_step(&s, window, 0);
        c->step_ns = s.step_ns;
    }
}

/* ---- the counter's real rate -------------------------------------------- */


static void measure_counter_hz(struct doctor_facts *f, int quick)
{
    if (!FC_HAVE_COUNTER) {
        copy_str(f->measured_err, sizeof f->measured_err, "no counter on this architecture");
        return;
    }
    uint64_t t0, t1;
    int64_t n0, n1;
    counter_pair(&t0, &n0);
    struct timespec nap = {quick ? 0 : 1, quick ? 150000000 : 0};
    while (nanosleep(&nap, &nap) != 0 && errno == EINTR) {
    }
    counter_pair(&t1, &n1);
    if (n1 <= n0 || t1 <= t0) {
        copy_str(f->measured_err, sizeof f->measured_err, "the counter or CLOCK_MONOTONIC_RAW did not advance");
        return;
    }
    f->measured_tsc_hz = (double)(t1 - t0) * 1e9 / (double)(n1 - n0);
    f->measured_err[0] = 0;
}

/* ---- warp ---------------------------------------------------------------- */

static void measure_warp(struct doctor_facts *f, int quick)
{
    struct fc_warp_result w;
    int r = fc_warp_check(quick ? 60000000 : 400000000, quick ? 3 : 16, &w);
    f->warp_pairs = w.pairs_tested;
    f->warp_pairs_skipped = w.pairs_skipped;
    f->warp_pairs_unpinned = w.pairs_unpinned;
    f->warp_iterations = w.iterations;
    f->warp_count = w.warps;
    if (r != 0) {
        f->warp_ran = 0;
        if (w.cpus < 2)
            snprintf(f->warp_err, sizeof f->warp_err, "only %d CPU available to this process", w.cpus);
        else
            snprintf(f->warp_err, sizeof f->warp_err, "%d CPU pair%s could not be compared (%s)", w.pairs_skipped,
                     w.pairs_skipped == 1 ? "" : "s", warp_skip_why(f));
        return;
    }
    f->warp_ran = 1;
    f->warp_err[0] = 0;
    copy_str(f->warp_insn, sizeof f->warp_insn, w.rdtscp ? FC_COUNTER_INSN_ALT : FC_COUNTER_INSN_ORDERED);
    f->warp_max_cycles = w.max_warp_cycles;
    f->warp_cpu_a = w.worst_cpu_a;
    f->warp_cpu_b = w.worst_cpu_b;
}

/* ---- fastclock ------------------------------------------------------------ */

static void read_fastclock(struct doctor_facts *f)
{
    struct fastclock_status st;
    if (fastclock_status(&st) != 0)
        return;
    f->fc_known = 1;
    copy_str(f->fc_mode, sizeof f->fc_mode, st.mode);
    copy_str(f->fc_reason, sizeof f->fc_reason, st.reason);
    f->fc_forced = st.forced;
    copy_str(f->fc_calibrator, sizeof f->fc_calibrator, st.calibrator);
    copy_str(f->fc_counter, sizeof f->fc_counter, st.counter);
    f->fc_counter_hz = st.counter_hz;
    f->fc_error_bound_ns = st.error_bound_ns;
}

void measure_live(struct doctor_facts *f, int quick, void (*progress)(const char *what, void *ctx), void *ctx)
{
    /* The mode decision first, so the costs below see a settled library. */
    (void)fastclock_mono_ns();
    if (progress) progress("checking whether clock calls enter the kernel", ctx);
    measure_seccomp(f);
    if (progress) progress("measuring the cost of every clock", ctx);
    measure_costs(f, quick);
    if (progress) progress("measuring clock resolution", ctx);
    measure_steps(f, quick);
    if (progress) progress("measuring the counter's frequency", ctx);
    measure_counter_hz(f, quick);
    if (progress) progress("checking cross-CPU counter warp", ctx);
    measure_warp(f, quick);
    read_fastclock(f);
}
