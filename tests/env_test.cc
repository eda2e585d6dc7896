// Configuration through the environment, checked in fresh processes: a bad
// value is reported once, in words a user understands, and ignored.
#include <gtest/gtest.h>

#include "seccomp_filter.h"
#include "test_util.h"

#include <string>
#include <vector>

#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace {

struct ProbeRun {
    int status = -1;
    std::string out, err;
};

std::string field(const std::string &out, const std::string &key)
{
    auto p = out.find(key + "=");
    if (p == std::string::npos)
        return "";
    auto e = out.find('\n', p);
    return out.substr(p + key.size() + 1, e - p - key.size() - 1);
}

// A probe that must have lived: whether it did, and how it ended otherwise.
bool lived(const ProbeRun &r) { return WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0; }
std::string ended(const ProbeRun &r)
{
    return "status " + std::to_string(r.status) +
           (WIFSIGNALED(r.status) ? " (killed by signal " + std::to_string(WTERMSIG(r.status)) + ")" : "") + "\n" + r.err;
}

// The skip of the tests that install a seccomp filter (in the probe).
const char kNoSeccompFilter[] = "no seccomp filter can be installed here (prctl PR_SET_SECCOMP or seccomp() refused: "
                                "a kernel without CONFIG_SECCOMP_FILTER, or qemu-user, which does not emulate it)";

std::string drain(int fd)
{
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        s.append(buf, size_t(n));
    close(fd);
    return s;
}

// This process's environment without FASTCLOCK_*, then `env`: the strings,
// and the NULL-terminated array execve takes (pointing into them).
struct ProbeEnv {
    std::vector<std::string> strings;
    std::vector<char *> envp;
    explicit ProbeEnv(const std::vector<std::string> &env)
    {
        for (char **e = environ; *e; e++)
            if (std::string(*e).rfind("FASTCLOCK_", 0) != 0)
                strings.push_back(*e);
        strings.insert(strings.end(), env.begin(), env.end());
        for (auto &e : strings)
            envp.push_back(const_cast<char *>(e.c_str()));
        envp.push_back(nullptr);
    }
};

ProbeRun probe(const std::vector<std::string> &env, const char *arg = nullptr, bool stdin_closed = false)
{
    ProbeEnv penv(env);
    std::vector<char *> &envp = penv.envp;
    int out[2], err[2];
    EXPECT_EQ(pipe(out), 0);
    EXPECT_EQ(pipe(err), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    if (stdin_closed)
        posix_spawn_file_actions_addclose(&fa, 0);
    std::string path = STATUS_PROBE;
    char *argv[] = {const_cast<char *>(path.c_str()), const_cast<char *>(arg), nullptr};
    pid_t pid;
    ProbeRun r;
    EXPECT_EQ(posix_spawn(&pid, path.c_str(), &fa, nullptr, argv, envp.data()), 0);
    close(out[1]);
    close(err[1]);
    r.out = drain(out[0]);
    r.err = drain(err[0]);
    waitpid(pid, &r.status, 0);
    posix_spawn_file_actions_destroy(&fa);
    return r;
}

// The probe in mode tsc with the given calibrator, running `what`.
ProbeRun probe_tsc(const char *calibrator, const char *what)
{
    return probe({"FASTCLOCK_MODE=tsc", std::string("FASTCLOCK_CALIBRATOR=") + calibrator}, what);
}

// The probe in a forked child that `prepare` sets up first (async-signal-safe
// calls only: the test runs threads); prepare returns 0, or the status the
// child exits with where it cannot (the caller's skip).
ProbeRun probe_forked(const std::vector<std::string> &env, const char *arg, int (*prepare)(const void *),
                      const void *ctx)
{
    ProbeEnv penv(env);
    std::string path = STATUS_PROBE;
    char *argv[] = {const_cast<char *>(path.c_str()), const_cast<char *>(arg), nullptr};
    int out[2], err[2];
    EXPECT_EQ(pipe(out), 0);
    EXPECT_EQ(pipe(err), 0);
    ProbeRun r;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1);
        dup2(err[1], 2);
        if (int status = prepare(ctx))
            _exit(status);
        // Kept across exec: a probe whose main thread a filter killed while
        // another runs on (SECCOMP_RET_KILL_THREAD) would otherwise hang the test.
        alarm(20);
        execve(path.c_str(), argv, penv.envp.data());
        _exit(98);
    }
    close(out[1]);
    close(err[1]);
    r.out = drain(out[0]);
    r.err = drain(err[0]);
    waitpid(pid, &r.status, 0);
    return r;
}

// The probe started as systemd starts a service under SystemCallFilter=:
// no_new_privs and a seccomp filter installed before exec, in every thread
// it will have.  The filter answers calls nr_a and nr_b (by default adjtimex
// and clock_adjtime: systemd's @clock) with `action` and lets every other
// call through.  status 99: the filter could not be installed here.
ProbeRun probe_under_filter(const std::vector<std::string> &env, uint32_t action, long nr_a = __NR_adjtimex,
                            long nr_b = __NR_clock_adjtime)
{
    // glibc's adjtimex() makes clock_adjtime: both, as systemd's @clock.
    struct sock_filter code[] = FC_TEST_FILTER_TWO_CALLS(nr_a, nr_b, action);
    struct sock_fprog prog = {(unsigned short)(sizeof code / sizeof code[0]), code};
    auto install = [](const void *p) -> int {
        return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, p) != 0
                   ? 99
                   : 0;
    };
    return probe_forked(env, nullptr, install, &prog);
}

// The probe where /proc shows nothing (a chroot without it; a container that
// masks it): its own mount namespace with an empty tmpfs over /proc.  status
// 97: no mount namespace here (CAP_SYS_ADMIN needed).
ProbeRun probe_without_proc(const std::vector<std::string> &env, const char *arg)
{
    auto hide_proc = [](const void *) -> int {
        return unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
                       mount("none", "/proc", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k") != 0
                   ? 97
                   : 0;
    };
    return probe_forked(env, arg, hide_proc, nullptr);
}

int count(const std::string &s, const std::string &what)
{
    int n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1))
        n++;
    return n;
}

} // namespace

TEST(Environment, DefaultsAreQuiet)
{
    ProbeRun r = probe({});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(field(r.out, "forced"), "0");
    EXPECT_EQ(field(r.out, "calibrator"), field(r.out, "mode") == "tsc" ? "thread" : "none");
}

// A program started with stdin closed: the calibrator's timerfd, made in
// the library's constructor, must not take descriptor 0, which the
// program's first open() expects to get (or a daemon's reopening of stdin).
TEST(Environment, TheTimerfdNeverTakesAStandardStream)
{
    ProbeRun r = probe({"FASTCLOCK_MODE=tsc", "FASTCLOCK_CALIBRATOR=thread"}, "fds", true);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(field(r.out, "fd.0"), "closed") << r.out;
    int timers = 0;
    for (int fd = 3; fd < 16; fd++)
        timers += field(r.out, "fd." + std::to_string(fd)) == "anon_inode:[timerfd]";
    // Made by the constructor, before main: never beside the program.
    EXPECT_GE(std::stoi(field(r.out, "timerfd_at_main")), 3) << r.out;
    FCTEST_SKIP_UNLESS_TSC(field(r.out, "mode"), field(r.out, "reason"));
    ASSERT_EQ(field(r.out, "calibrator"), "thread") << r.out;
    EXPECT_EQ(timers, 1) << r.out; // the thread waits on its timerfd
}

// A program that closed the calibrator's timerfd, then forks: the child's
// fork() returns 0 with errno as it was (the library's fork handler asks
// whether the descriptor is still its timer, and the kernel says EBADF).
TEST(Environment, AForkChildKeepsItsErrnoWhenTheTimerfdWasClosed)
{
    ProbeRun r = probe({"FASTCLOCK_MODE=tsc", "FASTCLOCK_CALIBRATOR=thread"}, "fork-errno");
    ASSERT_EQ(r.status, 0) << r.err;
    FCTEST_SKIP_UNLESS_TSC(field(r.out, "mode"), field(r.out, "reason"));
    ASSERT_EQ(field(r.out, "calibrator"), "thread") << r.out;
    EXPECT_EQ(field(r.out, "timerfd_closed"), "1") << r.out;
    EXPECT_EQ(field(r.out, "child_errno"), "unchanged") << r.out;
}

// A service under systemd's SystemCallFilter=@system-service (adjtimex is
// in @clock, which it leaves out) or =~@clock, without
// SystemCallErrorNumber=: the filter kills the process at its first
// adjtimex.  fastclock polls adjtimex (the kernel's rate settings, its
// maxerror); under a filter it asks first, in a child, and treats a call
// that would kill as refused -- as it treats ProtectClock's EPERM.
TEST(Environment, ASeccompFilterThatKillsForAdjtimexKillsNothing)
{
    struct Action {
        const char *name;
        uint32_t action;
    };
    const Action actions[] = {{"kill the process", SECCOMP_RET_KILL_PROCESS},
                              {"kill the thread", SECCOMP_RET_KILL_THREAD},
                              {"trap (SIGSYS, no handler)", SECCOMP_RET_TRAP},
                              {"refuse (EPERM)", SECCOMP_RET_ERRNO | EPERM}};
    for (const char *calibrator : {"thread", "lazy"}) {
        for (const Action &a : actions) {
            ProbeRun r = probe_under_filter({"FASTCLOCK_MODE=tsc", std::string("FASTCLOCK_CALIBRATOR=") + calibrator},
                                            a.action);
            if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 99)
                GTEST_SKIP() << kNoSeccompFilter;
            EXPECT_TRUE(lived(r)) << calibrator << ", adjtimex answered by: " << a.name << ": " << ended(r);
            // The kernel's synchronisation is unknown, not a guess.
            EXPECT_EQ(field(r.out, "kernel_synchronized"), "-1") << calibrator << ", " << a.name << ": " << r.out;
            EXPECT_EQ(field(r.out, "real_bounded"), "1") << calibrator << ", " << a.name << ": " << r.out;
        }
    }
    // Without a filter the kernel answers (0 or 1: this machine's daemon decides),
    // and under a filter that lets adjtimex through (Docker's default) too: the
    // child that asks says so.
    ProbeRun plain = probe({"FASTCLOCK_MODE=tsc"});
    ASSERT_EQ(plain.status, 0) << plain.err;
    EXPECT_NE(field(plain.out, "kernel_synchronized"), "-1") << plain.out;
    for (const char *calibrator : {"thread", "lazy"}) {
        ProbeRun allowed = probe_under_filter(
            {"FASTCLOCK_MODE=tsc", std::string("FASTCLOCK_CALIBRATOR=") + calibrator}, SECCOMP_RET_ALLOW);
        ASSERT_EQ(allowed.status, 0) << allowed.err;
        EXPECT_EQ(field(allowed.out, "kernel_synchronized"), field(plain.out, "kernel_synchronized"))
            << calibrator << ": under a filter that allows adjtimex: " << allowed.out;
    }
}

// A seccomp filter is a thread's own (unless installed with TSYNC).  The
// process asks and answers without one (the calibrator thread, made before
// main, polls every 10 ms; main's reads poll too); then a thread installs a
// filter that kills for adjtimex, on itself alone, and reads for 100 ms,
// its reads polling as any reader's do.  One answer for the process let it
// call adjtimex: killed by SIGSYS.  Each thread asks for itself.
TEST(Environment, AFilterAThreadInstallsLaterKillsNothing)
{
    // The filter kills for adjtimex, or refuses it (EPERM, libseccomp's
    // usual default): either way the thread's polls are refused, its own.
    for (const char *variant : {"filter-later", "filter-later-errno"})
    for (const char *calibrator : {"thread", "lazy"}) {
        SCOPED_TRACE(variant);
        ProbeRun r = probe_tsc(calibrator, variant);
        EXPECT_TRUE(lived(r)) << calibrator << ": " << ended(r);
        if (field(r.out, "filter") == "unavailable")
            GTEST_SKIP() << kNoSeccompFilter;
        EXPECT_EQ(field(r.out, "filter"), "installed") << calibrator << ": " << r.out;
        // Asked and answered before the filter: the kernel's state is known.
        EXPECT_NE(field(r.out, "kernel_synchronized"), "-1") << calibrator << ": " << r.out;
        // And stays known while the filtered thread's own polls are refused:
        // main's and the calibrator's answers stand (they flipped it to
        // "unknown" at every refusal).
        EXPECT_GT(std::stoi(field(r.out, "status_samples")), 10) << calibrator << ": " << r.out;
        EXPECT_EQ(field(r.out, "synchronized_unknown_seen"), "0") << calibrator << ": " << r.out;
    }
}

// A threaded program that sandboxes itself once running: it installs the
// filter on every thread at once (TSYNC, libseccomp's way where there are
// threads -- and the library's calibrator thread makes one).  The calibrator
// thread and main asked before and were answered "adjtimex answers"; each
// poll after sees the new filter and asks again.  Asking once per thread
// kept the old answer: killed by SIGSYS at the next poll.
static const char kNoMountNamespace[] = "no mount namespace to hide /proc in (unshare(CLONE_NEWNS) needs CAP_SYS_ADMIN)";

// That case, in mode tsc with either calibrator, /proc as it is or hidden.
static void expect_a_later_filter_on_every_thread_to_kill_nothing(bool without_proc)
{
    for (const char *calibrator : {"thread", "lazy"}) {
        std::vector<std::string> env = {"FASTCLOCK_MODE=tsc", std::string("FASTCLOCK_CALIBRATOR=") + calibrator};
        ProbeRun r = without_proc ? probe_without_proc(env, "filter-later-tsync") : probe(env, "filter-later-tsync");
        if (without_proc && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 97)
            GTEST_SKIP() << kNoMountNamespace;
        EXPECT_TRUE(lived(r)) << calibrator << ": " << ended(r);
        if (field(r.out, "filter") == "unavailable")
            GTEST_SKIP() << kNoSeccompFilter;
        EXPECT_EQ(field(r.out, "filter"), "installed") << calibrator << ": " << r.out;
        EXPECT_EQ(field(r.out, "mode"), "tsc") << calibrator << ": " << r.out;
        // Answered before the filter, refused since: unknown now.
        EXPECT_NE(field(r.out, "kernel_synchronized"), "-1") << calibrator << ": " << r.out;
        EXPECT_EQ(field(r.out, "kernel_synchronized_after"), "-1") << calibrator << ": " << r.out;
    }
}

TEST(Environment, AFilterInstalledOnEveryThreadLaterKillsNothing)
{
    expect_a_later_filter_on_every_thread_to_kill_nothing(false);
}

// Where /proc shows nothing (the library reads its status files, cpuinfo
// and the seccomp state there), the mode is the one it chooses with /proc,
// silently.
TEST(Environment, NoProcChangesNothing)
{
    ProbeRun plain = probe({});
    ASSERT_EQ(plain.status, 0) << plain.err;
    ProbeRun r = probe_without_proc({}, nullptr);
    if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 97)
        GTEST_SKIP() << kNoMountNamespace;
    ASSERT_EQ(r.status, 0) << ended(r);
    EXPECT_EQ(field(r.out, "mode"), field(plain.out, "mode")) << r.out;
    // The reason's first clause: a later one may carry a figure measured in each run.
    auto first_clause = [](const std::string &s) { return s.substr(0, s.find(';')); };
    EXPECT_EQ(first_clause(field(r.out, "reason")), first_clause(field(plain.out, "reason"))) << r.out;
    EXPECT_EQ(r.err, "");
}

// The same where /proc shows nothing: no thread's status says whether a
// filter is there, so a child asks first (adjtimex, and the prctl that then
// watches for a later filter); the TSYNC filter that prctl then sees sends
// every thread to a child again, which adjtimex kills: no call follows.
TEST(Environment, AFilterInstalledOnEveryThreadLaterKillsNothingWithoutProc)
{
    expect_a_later_filter_on_every_thread_to_kill_nothing(true);
}

// main reads, its polls answered, then installs on itself alone a filter
// that kills for adjtimex and reads on.  Its refusals are its own (they
// count: it was the last answered), but they must not hold back the
// calibrator thread's polls, which are answered: main polling at every
// millisecond of reading paced them away, and the process's state stayed
// "unknown" for good.
TEST(Environment, AReaderThatFiltersItselfHoldsBackNoOtherThreadsPolls)
{
    for (const char *calibrator : {"thread", "lazy"}) {
        ProbeRun r = probe_tsc(calibrator, "filter-main-later");
        EXPECT_TRUE(lived(r)) << calibrator << ": " << ended(r);
        if (field(r.out, "filter") == "unavailable")
            GTEST_SKIP() << kNoSeccompFilter;
        EXPECT_GT(std::stoi(field(r.out, "status_samples")), 200) << calibrator << ": " << r.out;
        EXPECT_EQ(field(r.out, "synchronized_unknown_late"), "0") << calibrator << ": " << r.out;
    }
}

// A program whose filter allows what glibc calls, and so not the getcpu
// system call (glibc answers sched_getcpu from rseq or the vDSO): the
// per-CPU lines' set-up, which asks the kernel which CPU runs it to check
// what rdtscp says, must not make the call.
TEST(Environment, PerCpuSetUpMakesNoGetcpuCall)
{
    ProbeRun plain = probe({"FASTCLOCK_MODE=percpu"});
    ASSERT_EQ(plain.status, 0) << plain.err;
    if (field(plain.out, "mode") != "tsc-percpu")
        GTEST_SKIP() << fctest::skip_unless_refused("tsc-percpu", field(plain.out, "mode"), field(plain.out, "reason"));
    for (const char *calibrator : {"thread", "lazy"}) {
        ProbeRun r = probe_under_filter({"FASTCLOCK_MODE=percpu", std::string("FASTCLOCK_CALIBRATOR=") + calibrator},
                                        SECCOMP_RET_KILL_PROCESS, __NR_getcpu, __NR_getcpu);
        if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 99)
            GTEST_SKIP() << kNoSeccompFilter;
        EXPECT_TRUE(lived(r)) << calibrator << ": " << ended(r);
        EXPECT_EQ(field(r.out, "mode"), "tsc-percpu") << calibrator << ": " << r.out;
    }
}

TEST(Environment, BogusModeIsReportedOnceAndIgnored)
{
    ProbeRun r = probe({"FASTCLOCK_MODE=bogus"});
    ASSERT_EQ(r.status, 0);
    EXPECT_EQ(count(r.err, "FASTCLOCK_MODE=bogus"), 1) << r.err;
    EXPECT_NE(r.err.find("must be auto, tsc, percpu (or tsc-percpu) or system"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("using auto"), std::string::npos) << r.err;
    EXPECT_EQ(field(r.out, "forced"), "0");
    // The status says so too: a program that reads it, not its stderr.
    EXPECT_EQ(field(r.out, "reason").rfind("FASTCLOCK_MODE=bogus ignored", 0), 0u) << r.out;
    ProbeRun dflt = probe({});
    EXPECT_EQ(field(r.out, "mode"), field(dflt.out, "mode"));
}

// Said when the library loads: a process that never reads the clock often
// enough to decide its mode (or a daemon that later gives descriptor 2 to a
// file) is told too, and a control character is never echoed raw.
TEST(Environment, BogusModeIsReportedWhenTheLibraryLoads)
{
    ProbeRun r = probe({"FASTCLOCK_MODE=bo\033[2Jgus"}, "no-reads");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "") << "the probe read nothing";
    EXPECT_EQ(count(r.err, "fastclock: ignoring FASTCLOCK_MODE=bo?[2Jgus"), 1) << r.err;
    EXPECT_EQ(r.err.find('\033'), std::string::npos) << "a control character echoed raw";
}

// FASTCLOCK_CALIBRATOR's warning shows its value as FASTCLOCK_MODE's does:
// a control character as '?', a long value clipped, the advice kept.
TEST(Environment, BogusCalibratorIsEchoedSafely)
{
    ProbeRun r = probe({"FASTCLOCK_CALIBRATOR=th\033[2Jread"}, "no-reads");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(count(r.err, "fastclock: ignoring FASTCLOCK_CALIBRATOR=th?[2Jread: it must be auto, thread or lazy"), 1)
        << r.err;
    EXPECT_EQ(r.err.find('\033'), std::string::npos) << "a control character echoed raw";
    std::string v(600, 'y');
    ProbeRun l = probe({"FASTCLOCK_CALIBRATOR=" + v}, "no-reads");
    ASSERT_EQ(l.status, 0) << l.err;
    EXPECT_EQ(l.err.find(v), std::string::npos) << "echoed whole";
    EXPECT_NE(l.err.find("FASTCLOCK_CALIBRATOR=" + std::string(40, 'y') + "...: it must be auto, thread or lazy; "
                         "using auto\n"),
              std::string::npos)
        << l.err;
}

// A value of any length is echoed clipped: the warning keeps its advice and
// its newline, the status its reason.
// FASTCLOCK_MODE is read when the library loads, not at the decision,
// which may run in a signal handler or beside another thread's setenv,
// where reading the environment is not safe.  So a program that changes it
// in main does not change the mode (here: system at load, tsc set in main).
TEST(Environment, ModeIsReadWhenTheLibraryLoads)
{
    ProbeRun r = probe({"FASTCLOCK_MODE=system"}, "setenv-tsc");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(field(r.out, "mode"), "system") << field(r.out, "reason");
    EXPECT_EQ(field(r.out, "forced"), "1");
}

TEST(Environment, ALongBogusModeIsClippedNotTheReason)
{
    std::string v(600, 'x');
    ProbeRun r = probe({"FASTCLOCK_MODE=" + v});
    ASSERT_EQ(r.status, 0);
    EXPECT_EQ(r.err.find(v), std::string::npos) << "echoed whole";
    EXPECT_NE(r.err.find("must be auto, tsc, percpu (or tsc-percpu) or system; using auto\n"), std::string::npos) << r.err;
    ProbeRun dflt = probe({});
    std::string reason = field(r.out, "reason"), plain = field(dflt.out, "reason");
    EXPECT_EQ(reason.rfind("FASTCLOCK_MODE=xxx", 0), 0u) << reason;
    ASSERT_GE(reason.size(), plain.size());
    EXPECT_EQ(reason.substr(reason.size() - plain.size()), plain) << "the reason itself was cut";
}

TEST(Environment, ModesAreCaseAndSpaceTolerant)
{
    ProbeRun r = probe({"FASTCLOCK_MODE= System "});
    ASSERT_EQ(r.status, 0);
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(field(r.out, "mode"), "system");
    EXPECT_EQ(field(r.out, "forced"), "1");
    EXPECT_NE(field(r.out, "reason").find("FASTCLOCK_MODE=system"), std::string::npos);
    r = probe({"FASTCLOCK_MODE=auto"});
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(field(r.out, "forced"), "0");
}

TEST(Environment, ForcedTscSaysSo)
{
    ProbeRun r = probe({"FASTCLOCK_MODE=tsc"});
    ASSERT_EQ(r.status, 0) << r.err;
    FCTEST_SKIP_UNLESS_TSC(field(r.out, "mode"), field(r.out, "reason"));
    EXPECT_EQ(field(r.out, "forced"), "1");
    EXPECT_EQ(field(r.out, "reason").rfind("FASTCLOCK_MODE=tsc", 0), 0u) << r.out;
}

TEST(Environment, CalibratorChoice)
{
    ProbeRun r = probe({"FASTCLOCK_MODE=tsc", "FASTCLOCK_CALIBRATOR=lazy"});
    ASSERT_EQ(r.status, 0) << r.err;
    FCTEST_SKIP_UNLESS_TSC(field(r.out, "mode"), field(r.out, "reason"));
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(field(r.out, "calibrator"), "lazy");
    r = probe({"FASTCLOCK_MODE=tsc", "FASTCLOCK_CALIBRATOR=sometimes"});
    EXPECT_EQ(count(r.err, "FASTCLOCK_CALIBRATOR=sometimes"), 1) << r.err;
    EXPECT_EQ(field(r.out, "calibrator"), "thread");
}

// The same binary on the same machine decides the same way every time: the
// mode answers "can the counter be trusted" (no cost coin toss), and the
// ordered instruction is chosen with a wide margin.
TEST(Decision, FiftyFreshProcessesDecideAlike)
{
    std::string slow;
    if (fctest::no_vdso(&slow))
        GTEST_SKIP() << slow << ", so calibration may not converge in every process";
    std::string first_mode, first_counter;
    int differ = 0;
    for (int i = 0; i < 50; i++) {
        ProbeRun r = probe({});
        ASSERT_EQ(r.status, 0) << r.err;
        std::string m = field(r.out, "mode"), c = field(r.out, "counter");
        if (i == 0) {
            first_mode = m;
            first_counter = c;
            std::printf("decision: mode %s, counter %s; %s\n", m.c_str(), c.c_str(), field(r.out, "reason").c_str());
        } else if (m != first_mode || c != first_counter) {
            differ++;
            ADD_FAILURE() << "run " << i << ": mode " << m << " counter " << c << " (first: " << first_mode
                          << ", " << first_counter << "): " << field(r.out, "reason");
        }
    }
    EXPECT_EQ(differ, 0);
}

// A setuid program must not take its configuration from the caller's
// environment (secure_getenv).  A setuid-nobody copy of the probe, run by
// root, starts with AT_SECURE set.
TEST(Environment, IgnoredBySetuidPrograms)
{
    if (geteuid() != 0)
        GTEST_SKIP() << "needs root to make a setuid copy of the probe";
    // A cross build runs the probe through a script that starts the
    // emulator (cmake/cross-run.cmake): the kernel honours the setuid bit
    // only of a program it executes itself, so AT_SECURE cannot be had.
    if (FILE *f = fopen(STATUS_PROBE, "r")) {
        char magic[2] = {0, 0};
        size_t n = fread(magic, 1, 2, f);
        fclose(f);
        if (n == 2 && magic[0] == '#' && magic[1] == '!')
            GTEST_SKIP() << "the probe runs under an emulator here (qemu-user): the kernel sets AT_SECURE only "
                            "for a setuid program it executes itself";
    }
    std::string dir = std::string(STATUS_PROBE) + ".setuid.d";
    std::string copy = dir + "/status_probe";
    ASSERT_EQ(system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "' && cp '" STATUS_PROBE "' '" + copy +
                      "' && chown nobody '" + copy + "' && chmod 4755 '" + copy + "'").c_str()),
              0);
    struct statvfs fs;
    if (statvfs(dir.c_str(), &fs) == 0 && (fs.f_flag & ST_NOSUID)) {
        system(("rm -rf '" + dir + "'").c_str());
        GTEST_SKIP() << "the build tree is on a nosuid mount: the kernel ignores the setuid bit there, so no "
                        "AT_SECURE";
    }
    std::string out;
    FILE *p = popen(("FASTCLOCK_MODE=system FASTCLOCK_CALIBRATOR=bogus '" + copy + "' 2>&1").c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[512];
    while (fgets(buf, sizeof buf, p))
        out += buf;
    int st = pclose(p);
    system(("rm -rf '" + dir + "'").c_str());
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "status " << st << ": " << out;
    ASSERT_NE(out.find("mode="), std::string::npos) << out;
    EXPECT_EQ(field(out, "forced"), "0") << out;
    EXPECT_EQ(out.find("FASTCLOCK_CALIBRATOR"), std::string::npos) << "a setuid program must not even mention it: " << out;
    // The same probe without setuid honours the variable.
    ProbeRun r = probe({"FASTCLOCK_MODE=system"});
    EXPECT_EQ(field(r.out, "forced"), "1");
}
