#define _GNU_SOURCE
#include "kernel.h"

#include "base.h"
#include "fmt.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/timex.h>
#include <sys/wait.h>
#include <unistd.h>

static int read_text(const char *root, const char *path, char *buf, size_t size)
{
    char full[512];
    size_t rl = root ? strlen(root) : 0, pl = strlen(path);
    if (size == 0)
        return -EINVAL;
    buf[0] = 0;
    if (rl + pl + 1 > sizeof full)
        return -ENAMETOOLONG;
    if (rl)
        memcpy(full, root, rl);
    memcpy(full + rl, path, pl + 1);

    int fd;
    do fd = open(full, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return -errno;
    size_t n = 0;
    while (n + 1 < size) {
        ssize_t r = read(fd, buf + n, size - 1 - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            buf[0] = 0;
            return -e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\t'))
        buf[--n] = 0;
    return (int)n;
}

/* Called from read paths too (a switch to per-CPU lines inside a read): the
 * error is the result, and errno stays the caller's. */
int fc_read_text(const char *root, const char *path, char *buf, size_t size)
{
    int saved = errno;
    int r = read_text(root, path, buf, size);
    errno = saved;
    return r;
}

int fc_kernel_children_change_timens(void)
{
    int saved = errno;
    char own[64], children[64];
    /* The calling thread's: unshare(CLONE_NEWTIME) changes the namespace
     * of the thread that calls it, and a fork takes the forking thread's. */
    ssize_t a = readlink("/proc/thread-self/ns/time", own, sizeof own);
    ssize_t b = readlink("/proc/thread-self/ns/time_for_children", children, sizeof children);
    errno = saved;
    return a > 0 && b > 0 && (a != b || memcmp(own, children, (size_t)a) != 0);
}

/* A number field of a /proc status text ("VmRSS:\t  1234 kB"), or -1.
 * Digits by hand: strtol is not async-signal-safe (its locale). */
static long status_field(const char *status, const char *name)
{
    const char *p = strstr(status, name);
    if (!p)
        return -1;
    p += strlen(name);
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p < '0' || *p > '9')
        return -1;
    long v = 0;
    while (*p >= '0' && *p <= '9' && v < 1000000000000L)
        v = v * 10 + (*p++ - '0');
    return v;
}

/* Set by the caller (under the poll token) before the clone: the child,
 * with its own copy of the memory, reads it. */
static int probe_tries_prctl;

/* The child: the calls sync.c makes, through the same wrapper (glibc's
 * makes clock_adjtime, another C library's adjtimex).  First SIGSYS
 * blocked (a filter that traps then kills it: no handler of the host's
 * runs) and its copy of the memory made not dumpable (a kill leaves no
 * core of it, whatever core_pattern says); either refused, it reports
 * "cannot tell". */
static void probe_child(void)
{
    sigset_t sigsys;
    struct timex tx;
    sigemptyset(&sigsys);
    sigaddset(&sigsys, SIGSYS);
    if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, &sigsys, NULL, _NSIG / 8) != 0 ||
        syscall(SYS_prctl, PR_SET_DUMPABLE, 0UL, 0UL, 0UL, 0UL) != 0)
        syscall(SYS_exit_group, 1);
    /* Where /proc could not say, the call the parent makes next (and
     * fc_kernel_seccomp_grew before each poll): tried here first.  Only
     * there: elsewhere the parent never makes it under a filter, and an
     * allow-list without it would make adjtimex look refused. */
    if (probe_tries_prctl)
        syscall(SYS_prctl, PR_GET_SECCOMP, 0UL, 0UL, 0UL, 0UL);
    memset(&tx, 0, sizeof tx);
    adjtimex(&tx);
    memset(&tx, 0, sizeof tx);
    tx.modes = ADJ_OFFSET_SS_READ;
    adjtimex(&tx);
    syscall(SYS_exit_group, 0);
}

/* Above this the copy is not made and adjtimex counts as refused: a wider
 * error bound and an unknown synchronisation state, never the process, nor
 * a stall of more than ~15 ms. */
#define PROBE_MAX_RSS_KB (512L * 1024)

/*
 * Whether adjtimex kills a child that runs under this thread's filters.
 * The child is a raw clone (no fork handlers run, the host's or ours;
 * glibc's cached ids untouched) with no exit signal (no SIGCHLD; a host
 * reaping with waitpid(-1) never takes it) and its own copy of the memory:
 * nothing it does reaches the process.  (A child sharing the memory would
 * cost less in a large process, but its core dump would hold the
 * process's memory, and glibc before 2.25 resets the parent thread's
 * cached ids from it.)  The copy's page tables cost 0.17 ms for a small
 * process, 2.7 ms at 100 MB resident, 27 ms at 1 GB (Intel Xeon guest), a
 * stall of every thread that faults meanwhile: over PROBE_MAX_RSS_KB it is
 * not made.  The caller's signals are blocked meanwhile, but SIGSYS: a filter
 * that traps the clone itself reaches the host's handler, as it would
 * without fastclock.  Returns 1 (kills, or cannot tell) or 0.
 */
static int adjtimex_kills_a_child(long rss_kb)
{
    if (rss_kb > PROBE_MAX_RSS_KB) /* unknown (no procfs, -1): asked, whatever it costs */
        return 1;
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, SIGSYS);
    if (pthread_sigmask(SIG_SETMASK, &all, &old) != 0)
        return 1;
    long pid = syscall(SYS_clone, 0UL, 0UL, 0UL, 0UL, 0UL);
    if (pid == 0)
        probe_child(); /* never returns */
    int kills = 1; /* no child (a process limit, a filter refusing clone): cannot tell */
    if (pid > 0) {
        int status = 0;
        long r;
        do r = syscall(SYS_wait4, pid, &status, __WALL, 0);
        while (r < 0 && errno == EINTR);
        kills = !(r == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return kills;
}

/* /proc/self/task/<tid>/status, for kernels without /proc/thread-self
 * (before 3.17): /proc/self/status is the main thread's, and a filter is a
 * thread's own.  fmt.h builds the path: async-signal-safe. */
static int read_own_task_status(char *buf, size_t size)
{
    char path[64];
    struct fc_buf b;
    long tid = syscall(SYS_gettid);
    if (tid <= 0)
        return -ESRCH;
    fc_buf_init(&b, path, sizeof path);
    fc_buf_str(&b, "/proc/self/task/");
    fc_buf_i64(&b, tid);
    fc_buf_str(&b, "/status");
    return fc_read_text("", path, buf, size);
}

/* The calling thread's seccomp state from its /proc status: the mode
 * (0 none, 1 strict, 2 filter; -1 unreadable) and, under a filter, how many
 * (-1 unknown); in *err (if asked) why it could not be read.  Static
 * buffer: callers serialise (sync.c's poll token keeps
 * it to one thread and a nested handler out; a signal handler's stack may
 * be small).  Whole: Seccomp: comes after Groups:, which a user in many
 * groups makes long. */
static long own_seccomp(long *filters, long *rss_kb, int *err)
{
    static char status[65536] FC_LARGE_BSS;
    int n = fc_read_text("", "/proc/thread-self/status", status, sizeof status);
    if (n < 0)
        n = read_own_task_status(status, sizeof status);
    if (err)
        *err = n < 0 ? -n : 0;
    *filters = n > 0 ? status_field(status, "\nSeccomp_filters:") : -1;
    if (rss_kb)
        *rss_kb = n > 0 ? status_field(status, "\nVmRSS:") : -1;
    /* No Seccomp: line (a kernel without seccomp, an emulator's status, a
     * read cut short by a long Groups:): unknown, as unreadable. */
    return n > 0 ? status_field(status, "\nSeccomp:") : -1;
}

/* prctl(PR_GET_SECCOMP): 0 none, 2 a filter (1, strict mode, kills it);
 * -1 where it fails. */
static long own_seccomp_mode(void)
{
    return prctl(PR_GET_SECCOMP, 0UL, 0UL, 0UL, 0UL);
}

int fc_kernel_adjtimex_kills(struct fc_adjtimex_memo *memo, struct fc_seccomp_seen *seen)
{
    int saved = errno;
    long filters, rss_kb;
    long mode = own_seccomp(&filters, &rss_kb, NULL);
    int prctl_answers = 0;
    int kills;
    if (mode == 1) {
        kills = 1; /* strict mode: nothing but read, write, exit and sigreturn */
        filters = 0;
    } else if (mode < 0) {
        /* /proc cannot say (a chroot without it, no Seccomp: line): a child
         * asks first -- adjtimex, and prctl, which it calls too.  Where both
         * are safe, prctl's word here: 0, no filter (re-checked by prctl
         * before each poll); a filter, or EINVAL (a kernel without
         * seccomp, or a filter's answer): not counted, not re-checked. */
        probe_tries_prctl = 1;
        kills = adjtimex_kills_a_child(rss_kb);
        probe_tries_prctl = 0;
        filters = -1;
        if (!kills && own_seccomp_mode() == 0) {
            filters = 0;
            prctl_answers = 1;
        }
    } else if (mode == 0 && own_seccomp_mode() == 0) {
        /* No filter: the call answers or returns an error.  prctl's word is
         * asked once now, when nothing can refuse it: a list traced from
         * this process then has the call fc_kernel_seccomp_grew makes, at
         * 170 ns, before each poll. */
        kills = 0;
        filters = 0;
        prctl_answers = 1;
    } else {
        /* A filter (the status's, or one prctl sees that the status did
         * not): a child asked under as many filters answers (threads made
         * after a filter share it), or a child is asked.  Not counted (a
         * kernel before 5.9; a filter only prctl saw): -1, which
         * fc_kernel_seccomp_grew cannot compare. */
        if (mode != 2 || filters <= 0)
            filters = -1;
        long asked = filters > 0 && memo ? __atomic_load_n(&memo->word, __ATOMIC_RELAXED) : 0;
        if (asked != 0 && asked >> 1 == filters) {
            kills = (int)(asked & 1);
        } else {
            kills = adjtimex_kills_a_child(rss_kb);
            if (filters > 0 && memo && filters < (1L << 40))
                __atomic_store_n(&memo->word, filters << 1 | kills, __ATOMIC_RELAXED);
        }
    }
    if (seen) {
        seen->filters = filters;
        seen->prctl_answers = prctl_answers;
    }
    errno = saved;
    return kills;
}

int fc_kernel_seccomp_grew(const struct fc_seccomp_seen *seen)
{
    long filters = seen->filters;
    if (filters < 0)
        return 0; /* no count to compare (before Linux 5.9, no procfs): not seen */
    int saved = errno;
    /* No filter then, and prctl answered then: its word now, 170 ns.  Any
     * other answer (a filter, or prctl refused) is a change, asked again
     * from the start -- not left to /proc, which a chroot may have taken
     * away (a failed read would then let adjtimex run under the filter). */
    if (filters == 0 && seen->prctl_answers) {
        int grew = own_seccomp_mode() != 0;
        errno = saved;
        return grew;
    }
    /* The /proc read the first answer made (open, read, close; 6-10 us).
     * Unreadable for want of descriptors or memory, for a moment: nothing
     * new, the count kept; gone (a chroot): asked again. */
    int err;
    long now, mode = own_seccomp(&now, NULL, &err);
    errno = saved;
    if (mode < 0)
        return !(err == EMFILE || err == ENFILE || err == ENOMEM);
    return filters == 0 ? mode != 0 : mode != 2 || now != filters;
}

void fc_clocksource_read(const char *root, struct fc_clocksource_info *cs)
{
    int r;
    memset(cs, 0, sizeof *cs);
    r = fc_read_text(root, FC_CLOCKSOURCE_DIR "/current_clocksource", cs->current, sizeof cs->current);
    cs->current_errno = r < 0 ? -r : (r == 0 ? ENODATA : 0);
    r = fc_read_text(root, FC_CLOCKSOURCE_DIR "/available_clocksource", cs->available, sizeof cs->available);
    cs->available_errno = r < 0 ? -r : (r == 0 ? ENODATA : 0);
}

int fc_word_in_list(const char *list, const char *word)
{
    size_t wl = strlen(word);
    const char *p = list;
    if (!wl)
        return 0;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == '\n') p++;
        const char *s = p;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n') p++;
        if ((size_t)(p - s) == wl && memcmp(s, word, wl) == 0)
            return 1;
    }
    return 0;
}

int fc_clocksource_list_unfiltered(const char *available)
{
    return fc_word_in_list(available, "jiffies") || fc_word_in_list(available, "refined-jiffies");
}

int fc_cmdline_param(const char *cmdline, const char *name, char *out, size_t size)
{
    size_t nl = strlen(name);
    const char *p = cmdline;
    int found = 0;
    if (size)
        out[0] = 0;
    while (*p) {
        while (*p == ' ' || *p == '\n') p++;
        const char *s = p;
        while (*p && *p != ' ' && *p != '\n') p++;
        /* Arguments after "--" belong to init, not to the kernel. */
        if (p - s == 2 && s[0] == '-' && s[1] == '-')
            break;
        if ((size_t)(p - s) > nl && memcmp(s, name, nl) == 0 && s[nl] == '=') {
            size_t vl = (size_t)(p - s) - nl - 1;
            if (size) {
                if (vl >= size) vl = size - 1;
                memcpy(out, s + nl + 1, vl);
                out[vl] = 0;
            }
            found = 1;
        }
    }
    return found;
}

const char *fc_errno_text(int e)
{
    switch (e) {
    case EACCES: return "permission denied";
    case EINVAL: return "invalid argument";
    case EPERM: return "operation not permitted";
    case ENOENT: return "no such file";
    case ENOTDIR: return "not a directory";
    case ENODATA: return "empty";
    case EIO: return "input/output error";
    case ENAMETOOLONG: return "path too long";
    case EMFILE: case ENFILE: return "too many open files";
    case ENOMEM: return "out of memory";
    case EISDIR: return "is a directory";
    default: return "unreadable";
    }
}

/* ---- arm64 timer errata -------------------------------------------------- */

/* One line of /proc/cpuinfo: remembers the block's implementer, and says
 * whether this line names a Cortex-A73 (MIDR implementer 0x41, part 0xd09). */
static int cpuinfo_line_is_a73(const char *line, size_t n, int *impl_arm)
{
    static const char impl[] = "CPU implementer", part[] = "CPU part";
    const char *colon = memchr(line, ':', n);
    if (!colon)
        return 0;
    const char *v = colon + 1;
    while (v < line + n && (*v == ' ' || *v == '\t')) v++;
    size_t vl = (size_t)(line + n - v);
    if (n >= sizeof impl - 1 && memcmp(line, impl, sizeof impl - 1) == 0)
        *impl_arm = vl >= 4 && (memcmp(v, "0x41", 4) == 0 || memcmp(v, "0X41", 4) == 0);
    else if (n >= sizeof part - 1 && memcmp(line, part, sizeof part - 1) == 0)
        return *impl_arm && vl >= 5 && strncasecmp(v, "0xd09", 5) == 0;
    return 0;
}

/* 1 if any CPU in /proc/cpuinfo under root is a Cortex-A73.  Streamed in
 * pieces (a big machine's cpuinfo is tens of kB); open/read/close only. */
static int cpuinfo_has_a73(const char *root)
{
    char full[512], buf[2048];
    size_t rl = strlen(root), pl = sizeof "/proc/cpuinfo";
    if (rl + pl > sizeof full)
        return 0;
    memcpy(full, root, rl);
    memcpy(full + rl, "/proc/cpuinfo", pl);
    int fd;
    do fd = open(full, O_RDONLY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0)
        return 0;
    size_t have = 0;
    int impl_arm = 0, found = 0, eof = 0;
    while (!found && !eof) {
        ssize_t r = read(fd, buf + have, sizeof buf - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            eof = 1;
            r = 0;
        }
        have += (size_t)r;
        size_t start = 0;
        for (size_t i = 0; i < have && !found; i++) {
            if (buf[i] != '\n')
                continue;
            found = cpuinfo_line_is_a73(buf + start, i - start, &impl_arm);
            start = i + 1;
        }
        if (eof && start < have && !found)
            found = cpuinfo_line_is_a73(buf + start, have - start, &impl_arm);
        if (start == 0 && have == sizeof buf)
            start = have; /* a line longer than the buffer (Features): not ours */
        memmove(buf, buf + start, have - start);
        have -= start;
    }
    close(fd);
    return found;
}

int fc_counter_erratum(const char *root, char *why, size_t size)
{
    /* Device-tree properties of the timer node that the kernel keys these on. */
    static const struct { const char *prop, *name; } dt[] = {
        {"fsl,erratum-a008585", "Freescale erratum A-008585"},
        {"hisilicon,erratum-161010101", "HiSilicon erratum 161010101"},
        {"allwinner,erratum-unknown1", "Allwinner A64's erratum UNKNOWN1"},
    };
    static const char *const nodes[] = {"/sys/firmware/devicetree/base/timer/",
                                        "/proc/device-tree/timer/"};
    const char *name = 0;
    char tmp[8];
    for (unsigned i = 0; i < sizeof dt / sizeof dt[0] && !name; i++)
        for (unsigned j = 0; j < sizeof nodes / sizeof nodes[0] && !name; j++) {
            char path[160];
            size_t nl = strlen(nodes[j]), ml = strlen(dt[i].prop);
            memcpy(path, nodes[j], nl);
            memcpy(path + nl, dt[i].prop, ml + 1);
            /* A boolean property is an empty file: present is what counts. */
            int r = fc_read_text(root, path, tmp, sizeof tmp);
            if (r >= 0)
                name = dt[i].name;
        }
    if (!name) {
        int saved = errno; /* its open and read: errno as it was, as fc_read_text keeps it */
        if (cpuinfo_has_a73(root))
            name = "ARM erratum 858921 (Cortex-A73)";
        errno = saved;
    }
    if (!name)
        return 0;
    if (size) {
        static const char a[] = "the kernel works around a timer erratum here (";
        static const char c[] = "): it traps every counter read from user space and its vDSO makes a "
                                "system call, so the counter is correct but no cheaper than the kernel, "
                                "which answers instead";
        size_t n = 0;
        const char *parts[] = {a, name, c};
        for (unsigned i = 0; i < 3; i++)
            for (const char *p = parts[i]; *p && n + 1 < size; p++)
                why[n++] = *p;
        why[n] = 0;
    }
    return 1;
}
